"""The metrics leaving the node: the snapshot's series, encoded to OTLP (or through an SDK
exporter), pushed every interval; the console's lines; the pipeline's traces."""
