"""What every Python test runner under tests/ shares (one definition each).

    check     SKIP, Failed, skip(), the Checker that collects differences,
              load_json()
    process   run() a child with a time limit (optionally a watchdog that
              kills its process group, a umask); Result describes it
    env       preload() (sanitizer runtimes first), sanitized(), clean_env() without
              torchseal settings, with_simcuda(), need() for meson's paths,
              torch_env_dir() (the real-PyTorch venv)
    tseal     a history file's chunks and varints, read without torchseal's
              reader (bench/run_bench.py uses it too)

A runner puts tests/ on sys.path and imports from here. Python 3 standard
library only.
"""

from .check import SKIP, Checker, Failed, load_json, skip
from .env import (clean_env, interpreter_env, need, preload, sanitized, torch_env_dir,
                  with_simcuda)
from .process import Result, run, tail

__all__ = ["SKIP", "Checker", "Failed", "load_json", "skip", "clean_env", "need", "preload",
           "sanitized", "torch_env_dir", "with_simcuda", "Result", "run", "tail"]
