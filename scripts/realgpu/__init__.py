"""scripts/real-gpu's parts, one job each:

    stack      which CUDA driver and runtime the programs will load, whether
               a GPU answers, and the environment that selects that stack
    sanitizer  find compute-sanitizer, run it, parse its leak list
    leaksets   leak sets (site, bytes, allocations) from the expectations,
               a torchseal report or a parsed sanitizer run
    examples   the C++ examples, run and checked as tests/integration does
    torch_tier the real-torch patterns, checked as tests/torch does
    table      the comparison table

Python 3 standard library only.
"""
