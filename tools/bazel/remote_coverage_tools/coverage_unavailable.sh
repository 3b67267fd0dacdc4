#!/bin/sh
# Stands in for Bazel's coverage tools, which this offline build does not fetch.
echo "bazel coverage is not supported here: @remote_coverage_tools is an offline stand-in (tools/bazel/)" >&2
exit 1
