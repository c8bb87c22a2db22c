/* A library that the host program uses; rel_interpose.c wraps its function. */
int rel_hello(void) { return 1; }
