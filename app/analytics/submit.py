"""Entry of the Spark jobs under ``spark-submit``, for a cluster.

spark-submit runs a Python file, not a module: give it this file and the
``kepl spark`` arguments, with the connector of the cluster's Spark as a package::

    spark-submit --master spark://spark-master:7077 \\
        --packages "$(kepl spark packages)" \\
        "$(python -c 'import app.analytics.submit as m; print(m.__file__)')" \\
        stream app.yaml --sink parquet --path s3a://bucket/kepl --checkpoint s3a://bucket/ckpt

The master, the packages and every other Spark setting are spark-submit's; ``--master``
given after the file is ignored. The driver needs kepl installed (``pip install
'kepl[spark]'``); the executors do not (the jobs use no Python functions on rows).
Kafka client security settings come from ``--kafka-config``, ``KEPL_KAFKA_CONFIG`` or
``KEPL_KAFKA_*`` variables on the driver, as for ``kepl spark``.
"""

from __future__ import annotations

import sys

from app.analytics.cli import main

if __name__ == "__main__":
    sys.exit(main(submitted=True))
