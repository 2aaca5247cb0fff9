"""The Spark pipeline: traces -> replay -> per-interval metrics -> summaries -> report.

The only package that imports pyspark. Stages are plain DataFrame -> DataFrame functions
(stages.py); job.py wires them into ``sweepq pipeline`` and a spark-submit entry point.
"""
