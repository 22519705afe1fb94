"""What every Python step loop of stallscope shares: the step clock, the device wait, peak memory.

Two clients, one rule each (docs/methodology.md): the peers harness (`stallscope_peer`), which owns
its loop, and the job instrumentation (`stallscope_job`), which watches a user's loop through hooks.
Both time a step with `clock.StepClock` (where the device is waited for and where the clock is
read, in the two timing modes, as `fixtures/loop/contract.json` says), wait for the device with
`devices.sync`, and read peak memory per measured window with `peaks`.

This package imports neither client (python/tests/test_layers.py holds that), and nothing in it
imports torch at module level: the job's start-up imports it before torch exists.
"""
