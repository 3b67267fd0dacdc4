"""The symbols @bazel_tools loads from @rules_cc//cc:defs.bzl, forwarded to the rules built into Bazel 4.2.3."""

cc_binary = native.cc_binary
cc_library = native.cc_library
cc_proto_library = native.cc_proto_library
cc_test = native.cc_test
cc_toolchain = native.cc_toolchain
cc_toolchain_suite = native.cc_toolchain_suite
objc_library = native.objc_library
