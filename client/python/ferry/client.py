"""A client of the Ferry compilation service (ferry.v1.Compiler), the
Python counterpart of client/include/ferry/client.h.

    client = ferry.Client("127.0.0.1:50051")
    response = client.lower(program_or_request)      # LowerResponse
    response = client.verify(request, device="sim")  # VerifyResponse

Calls carry a deadline (``deadline`` seconds unless the call sets one) and
gRPC retries them within it on UNAVAILABLE and RESOURCE_EXHAUSTED, as the
service config of the C++ client says (share/ferry/service_config.json,
client/service_config.json in the tree; Lower, Verify and GetCapabilities are
idempotent). A request the server refuses raises
:class:`ClientError` with the gRPC code and the server's google.rpc details;
a program that does not compile is an ordinary response with ``ok`` false.
"""

import hashlib
import json
import os
import struct
import sys

from ferry import FerryError
from ferry.proto import program_pb2, compiler_pb2

try:
    import grpc
except ImportError as e:  # pragma: no cover - Debian's python3-grpcio
    raise FerryError(f"the Ferry client needs gRPC: {e} (install "
                     "python3-grpcio)", exit_code=2) from None

from ferry.proto import compiler_pb2_grpc  # noqa: E402

__all__ = ["Client", "ClientError", "request_digest"]


def request_digest(request, compiler_version):
    """The key a server of `compiler_version` caches `request`'s result by
    (docs/service.md, "Request digests"; the C++ side is
    proto/ferry/digest.h): SHA-256 over length-prefixed parts."""
    if isinstance(request, program_pb2.Program):
        request = program_pb2.LowerRequest(program=request)
    sha = hashlib.sha256()
    for part in (b"ferry.v1.Compiler/Lower", compiler_version.encode(),
                 request.SerializeToString(deterministic=True)):
        sha.update(struct.pack("<Q", len(part)))
        sha.update(part)
    return sha.hexdigest()

_DEVICES = {
    "auto": compiler_pb2.VERIFY_DEVICE_AUTO,
    "sim": compiler_pb2.VERIFY_DEVICE_SIM,
    "cuda": compiler_pb2.VERIFY_DEVICE_CUDA,
}


def service_config_path():
    """The service config the C++ client compiles in: $FERRY_SERVICE_CONFIG,
    else client/service_config.json of the source tree this package is in,
    else PREFIX/share/ferry/service_config.json of an install."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("FERRY_SERVICE_CONFIG"),
                  os.path.join(here, "..", "..", "service_config.json")]
    candidates += [os.path.join(prefix, "share", "ferry", "service_config.json")
                   for prefix in (sys.prefix, "/usr/local", "/usr")]
    for path in candidates:
        if path and os.path.isfile(path):
            return path
    raise FerryError("service_config.json (the retry policy) not found: set "
                     "FERRY_SERVICE_CONFIG to share/ferry/service_config.json "
                     "of a Ferry install", exit_code=2)


def service_config_json(max_attempts=None, initial_backoff=None,
                        max_backoff=None):
    """The service config as JSON, with the retry fields given replaced
    (max_attempts 1: no retry policy)."""
    with open(service_config_path(), encoding="utf-8") as f:
        config = json.load(f)
    for method in config.get("methodConfig", []):
        if max_attempts == 1:
            method.pop("retryPolicy", None)
            continue
        policy = method.setdefault("retryPolicy", {})
        if max_attempts is not None:
            policy["maxAttempts"] = int(max_attempts)
        if initial_backoff is not None:
            policy["initialBackoff"] = f"{float(initial_backoff):.3f}s"
        if max_backoff is not None:
            policy["maxBackoff"] = f"{float(max_backoff):.3f}s"
    return json.dumps(config)


class ClientError(FerryError):
    """A call the server (or the channel) refused.

    ``code`` is the grpc.StatusCode, ``details`` the server's google.rpc
    detail messages (BadRequest, QuotaFailure, RetryInfo,
    PreconditionFailure, ErrorInfo), unpacked."""

    def __init__(self, code, message, details=()):
        text = f"{code.name}: {message}"
        for d in details:
            for line in _detail_lines(d):
                text += f"; {line}"
        exit_code = 3 if code == grpc.StatusCode.FAILED_PRECONDITION else 1
        super().__init__(text, exit_code=exit_code)
        self.code = code
        self.details = list(details)


def _detail_lines(detail):
    name = type(detail).__name__
    if name == "BadRequest":
        return [f"{v.field}: {v.description}" for v in detail.field_violations]
    if name == "QuotaFailure":
        return [f"limit: {v.description}" for v in detail.violations]
    if name == "PreconditionFailure":
        return [
            f"{v.type} {v.subject}: {v.description}" for v in detail.violations
        ]
    if name == "RetryInfo":
        d = detail.retry_delay
        return [f"retry after {d.seconds + d.nanos / 1e9:.3f}s"]
    return []


def _unpack_details(error):
    """The google.rpc.Status details a gRPC error carries."""
    trailers = error.trailing_metadata() or ()
    raw = None
    for key, value in trailers:
        if key == "grpc-status-details-bin":
            raw = value
    if raw is None:
        return []
    from google.rpc import error_details_pb2, status_pb2
    status = status_pb2.Status()
    try:
        status.ParseFromString(raw)
    except Exception:
        return []
    out = []
    for any_detail in status.details:
        for cls in (error_details_pb2.BadRequest, error_details_pb2.QuotaFailure,
                    error_details_pb2.RetryInfo,
                    error_details_pb2.PreconditionFailure,
                    error_details_pb2.ErrorInfo):
            if any_detail.Is(cls.DESCRIPTOR):
                msg = cls()
                any_detail.Unpack(msg)
                out.append(msg)
    return out


def _streamed(stream_method, progress):
    """A unary-looking call of a LowerStream/VerifyStream method: each
    ProgressUpdate goes to `progress`, the result is returned."""

    def call(request, timeout, metadata):
        result = None
        for event in stream_method(request, timeout=timeout,
                                   metadata=metadata):
            if event.HasField("result"):
                result = event.result
            elif event.HasField("progress"):
                progress(event.progress)
        if result is None:
            raise ClientError(grpc.StatusCode.INTERNAL,
                              "the stream ended without a result")
        return result

    return call


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise FerryError(f"{what} '{path}': {e.strerror}", exit_code=2) from None


class Client:
    """A channel to one ferryd.

    address: "host:port", "dns:///name:port", "unix:/path".
    tls: use TLS (system roots unless root_ca); root_ca, cert, key: PEM file
    paths (cert and key together: mTLS); server_name: name expected in the
    server certificate (tests, IP targets).
    token / token_file: sent as "authorization: Bearer TOKEN".
    deadline: seconds, for calls that set none. max_message_bytes: largest
    message sent or received. metadata: (key, value) pairs sent on every
    call. max_attempts (at most 5, gRPC's limit; 1: no retries),
    initial_backoff, max_backoff (seconds): replace the service config's
    retry policy fields when given. attempts: calls started (gRPC's retries
    inside a call are not counted).
    """

    def __init__(self,
                 address,
                 *,
                 tls=False,
                 root_ca=None,
                 cert=None,
                 key=None,
                 server_name=None,
                 token=None,
                 token_file=None,
                 deadline=60.0,
                 max_message_bytes=256 << 20,
                 metadata=(),
                 max_attempts=None,
                 initial_backoff=None,
                 max_backoff=None):
        if not address:
            raise FerryError("Client: an address (HOST:PORT) is needed",
                             exit_code=2)
        if (cert is None) != (key is None):
            raise FerryError("Client: cert and key go together", exit_code=2)
        if (root_ca or cert) and not tls:
            tls = True
        if token_file:
            token = _read(token_file, "token file").decode().strip()
            if not token:
                raise FerryError(f"token file '{token_file}' is empty",
                                 exit_code=2)
        if deadline is None or deadline <= 0 or (
                max_attempts is not None and not 1 <= max_attempts <= 5):
            raise FerryError("Client: deadline > 0 and max_attempts from 1 "
                             "to 5", exit_code=2)
        self.address = address
        self.deadline = float(deadline)
        self.max_message_bytes = int(max_message_bytes)
        self.attempts = 0
        self._metadata = list(metadata) + [("x-ferry-client", "ferry-python")]
        if token:
            self._metadata.append(("authorization", f"Bearer {token}"))
        options = [
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.enable_retries", 1),
            ("grpc.service_config",
             service_config_json(max_attempts, initial_backoff, max_backoff)),
        ]
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        if tls:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(root_ca, "CA file") if root_ca else None,
                private_key=_read(key, "key file") if key else None,
                certificate_chain=_read(cert, "certificate file")
                if cert else None)
            self._channel = grpc.secure_channel(address, credentials, options)
        else:
            self._channel = grpc.insecure_channel(address, options)
        self._stub = compiler_pb2_grpc.CompilerStub(self._channel)

    # --- Calls

    def lower(self, request, *, deadline=None, request_id=None,
              bypass_cache=False, progress=None):
        """Lowers a LowerRequest (or a bare Program with default options);
        returns the LowerResponse. With `progress` (a callable) the call
        goes through LowerStream and `progress` gets each ProgressUpdate."""
        if isinstance(request, program_pb2.Program):
            request = program_pb2.LowerRequest(program=request)
        self._check_size(request)
        method = (self._stub.Lower if progress is None else _streamed(
            self._stub.LowerStream, progress))
        return self._call(method, request, deadline, request_id, bypass_cache)

    def verify(self,
               request,
               *,
               device="sim",
               seed=0,
               inputs=None,
               include_program=False,
               deadline=None,
               request_id=None,
               bypass_cache=False,
               progress=None):
        """Lowers and verifies; `request` is a VerifyRequest, a LowerRequest
        or a Program (then device, seed, inputs (an InputSet) and
        include_program fill the VerifyRequest). Returns the
        VerifyResponse. `progress`: as for lower (VerifyStream)."""
        if isinstance(request, program_pb2.Program):
            request = program_pb2.LowerRequest(program=request)
        if isinstance(request, program_pb2.LowerRequest):
            if device not in _DEVICES:
                raise FerryError(f"unknown device '{device}' (auto, sim, "
                                 "cuda)", exit_code=2)
            verify = compiler_pb2.VerifyRequest(request=request,
                                                device=_DEVICES[device],
                                                seed=seed,
                                                include_program=include_program)
            if inputs is not None:
                verify.inputs.CopyFrom(inputs)
            request = verify
        self._check_size(request)
        method = (self._stub.Verify if progress is None else _streamed(
            self._stub.VerifyStream, progress))
        return self._call(method, request, deadline, request_id, bypass_cache)

    def request_digest(self, request):
        """`request`'s digest for this server (its compiler version, asked
        once)."""
        if getattr(self, "_compiler_version", None) is None:
            self._compiler_version = self.capabilities().compiler_version
        return request_digest(request, self._compiler_version)

    def lookup(self, digest, *, deadline=None):
        """The cached LowerResponse of a request digest, or None when the
        server does not hold it (the program need not be sent)."""
        try:
            return self._call(self._stub.Lookup,
                              compiler_pb2.LookupRequest(request_digest=digest),
                              deadline, None, False)
        except ClientError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def capabilities(self, *, deadline=None):
        """The server's GetCapabilitiesResponse."""
        return self._call(self._stub.GetCapabilities,
                          compiler_pb2.GetCapabilitiesRequest(), deadline, None,
                          False)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- Internals

    def _check_size(self, request):
        size = request.ByteSize()
        if size > self.max_message_bytes:
            raise ClientError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the request is {size} bytes, over the client's message "
                f"limit of {self.max_message_bytes} bytes: export with "
                "--no-weights (a Lower needs no weight data), or lower and "
                "verify in process (without --server)")

    def _call(self, method, request, deadline, request_id, bypass_cache):
        metadata = list(self._metadata)
        if request_id:
            metadata.append(("x-request-id", request_id))
        if bypass_cache:
            metadata.append(("ferry-cache", "bypass"))
        timeout = self.deadline if deadline is None else float(deadline)
        self.attempts += 1
        try:
            return method(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as e:
            code = e.code()
            details = _unpack_details(e)
            message = e.details() or ""
            too_large = any(
                type(d).__name__ == "QuotaFailure" and any(
                    v.subject == "request_bytes" for v in d.violations)
                for d in details) or "larger than max" in message
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED and too_large:
                message += (" (the request is over the server's message "
                            "limit: export with --no-weights, or lower "
                            "and verify in process, without --server)")
            raise ClientError(code, f"{self.address}: {message}",
                              details) from None
