"""The generated protobuf modules, imported with a clear error when they
have not been built (see ferry.__init__)."""

from ferry import FerryError, proto_dir

proto_dir()
try:
    from ferry.v1 import program_pb2  # noqa: E402
    from ferry.v1 import report_pb2  # noqa: E402
except ImportError as e:  # e.g. python3-protobuf missing
    raise FerryError(f"cannot import the generated protobuf modules: {e} "
                     "(install python3-protobuf)", exit_code=2) from None

# Also, imported on first use: compiler_pb2, compiler_pb2_grpc (needs
# python3-grpcio), status_pb2 and error_details_pb2 (google.rpc).
__all__ = ["program_pb2", "report_pb2"]


def __getattr__(name):
    if name == "compiler_pb2":
        from ferry.v1 import compiler_pb2
        return compiler_pb2
    if name == "compiler_pb2_grpc":
        try:
            from ferry.v1 import compiler_pb2_grpc
        except ImportError as e:
            raise FerryError(f"the Ferry client needs gRPC: {e} "
                             "(install python3-grpcio)", exit_code=2) from None
        return compiler_pb2_grpc
    if name in ("status_pb2", "error_details_pb2"):
        import importlib
        return importlib.import_module(f"google.rpc.{name}")
    raise AttributeError(name)
