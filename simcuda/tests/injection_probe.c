/* A CUDA injection library: counts its initialisations. */
__attribute__((visibility("default"))) int simcuda_test_injection_calls;

__attribute__((visibility("default"))) int InitializeInjection(void)
{
    return ++simcuda_test_injection_calls;
}
