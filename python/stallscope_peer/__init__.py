"""The stallscope peers harness: the `pytorch` and `spdl` engines (docs/peers-protocol.md)."""

PROTOCOL = 1
