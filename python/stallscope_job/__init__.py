"""stallscope's instrumentation of an unmodified training script (`stallscope job`, docs/job-protocol.md)."""

PROTOCOL = 2
ENV = "STALLSCOPE_JOB"
