"""polyduct benchmarks: runtime and compile time against eager and Inductor, instruction counts.

`python -m bench` runs the runtime suite; `python -m bench --help` lists the other suites
(compile time, compile-time instruction counts under callgrind, and the expected-results checker).
"""
