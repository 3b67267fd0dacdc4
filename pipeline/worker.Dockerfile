# The Beam worker image for Dataflow (or any portable runner): Beam's own Python 3.11 SDK image with this
# project's pinned requirements, tensorflow-text above all (the Beam jobs tokenize with its ops).
#
#   docker build -f pipeline/worker.Dockerfile -t REGION-docker.pkg.dev/PROJECT/REPO/pipeline-worker:2.77.0 .
#   docker push REGION-docker.pkg.dev/PROJECT/REPO/pipeline-worker:2.77.0
#
# then pass `--sdk_container_image` with that tag and `--setup_file ./setup.py` (ships pipeline/,
# preprocessing/ and commands/). The SDK version of the image must equal the launching environment's apache-beam.
FROM apache/beam_python3.11_sdk:2.77.0

COPY requirements.txt /tmp/requirements.txt
RUN pip install --no-cache-dir -r /tmp/requirements.txt && rm /tmp/requirements.txt

# Dataflow runs one SDK process per vCPU; TensorFlow would give each of them thread pools as wide as the VM.
# One core's worth each (measured on Dask workers: docs/distributed_runners.md); raise them for a job that
# runs one SDK process per VM (--experiments=no_use_multiple_sdk_containers).
ENV TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1
