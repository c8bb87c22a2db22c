/* A library that the host program uses; rel_interpose.c wraps its function. */
int rel_hello(void) { return 1; }

/* Referenced by the test program so librel_base stays a DT_NEEDED after
   librel_interpose: it is what rel_interpose's RTLD_NEXT lookup must find. */
int rel_base_marker(void) { return 7; }
