"""The stallscope peers harness: the `pytorch`, `spdl`, `dali` and `nodes` engines (docs/peers-protocol.md)."""

PROTOCOL = 1
