/* Stands in for libtorchseal.so in the CLI tests: `torchseal run` only needs
   a preloadable object to point LD_PRELOAD at. */
int torchseal_fake_shim_loaded = 1;
