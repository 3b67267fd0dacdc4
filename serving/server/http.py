"""A local model server speaking TF Serving's REST API (and gRPC), over the same version folders and config file.

    .venv/bin/python -m serving.server --model_config_file FILE | --model_name NAME --model_base_path DIR \\
        [--rest_api_port 8501] [--port 8500] [--rest_api_host 127.0.0.1] [--file_system_poll_wait_seconds 1] \\
        [--enable_batching] [--max_request_bytes N] [--rest_api_num_threads 64] [--rest_api_timeout_in_ms 30000] \\
        [--max_instances_per_request 1024] [--max_new_tokens 256] [--rest_api_header_timeout_in_ms 10000] \\
        [--rest_api_max_connections 1024] [--rest_api_max_connections_per_client 512] \\
        [--rest_api_max_inflight_bytes 134217728] [--max_elements_per_request 16777216] \\
        [--enable_signature_method_name_check]

REST routes, as TF Serving's http_rest_api_handler (paths are case-insensitive, name and label URL-decoded):
  GET  /v1/models/NAME[/versions/N | /labels/L]             model version status
  GET  /v1/models/NAME[/versions/N | /labels/L]/metadata    signature defs
  POST /v1/models/NAME[/versions/N | /labels/L]:predict     (and :classify, :regress)
Errors are `{"error": "..."}` with TF Serving's HTTP codes (INVALID_ARGUMENT -> 400, NOT_FOUND -> 404, ...);
any other path or method under /v1/ is "Malformed request" (400), outside /v1/ 404. Differences from TF
Serving: binds to 127.0.0.1 unless `--rest_api_host` says otherwise (TF Serving binds all interfaces); a body
over `--max_request_bytes` gets 413; `--rest_api_port 0` picks a free port (TF Serving: REST off) and
`--port 0` turns gRPC off; a MultiInference runs its tasks one by one (TF Serving: one session call). The
start-up line says where it listens. Same as TF Serving: SavedModels (TF1 and TF2) run in a session, inputs
fed by tensor name with no check against the signature's shapes (`session.py`); Classify/Regress check a
signature's method_name only with `--enable_signature_method_name_check`.

Bounds on one request's work (REST; see docs/limits.md): at most `--max_instances_per_request` instances
(row format), leading-dimension rows (columnar) or examples, and a `max_new_tokens` input (GPT's `generate`)
of at most `--max_new_tokens`; beyond them, 400 with a sentence naming the flag, before any model runs.
gRPC: each input tensor's values must match its declared shape, and all of them together hold at most
`--max_elements_per_request` elements; otherwise INVALID_ARGUMENT before any array is made.
HTTP (`transport.py`, `connections.py`): one event loop owns the sockets and hands whole requests to
`--rest_api_num_threads` workers, so idle or slow clients hold no worker; `--rest_api_header_timeout_in_ms`
for headers, `--rest_api_timeout_in_ms` for a pause in a body or a keep-alive idle; connection caps in all
and per client IP; `--rest_api_max_inflight_bytes` of bodies at once; gzip/deflate request bodies. h11
reads and writes HTTP/1.1 (`http_protocol.py`), once per request: a head it cannot read, or malformed
framing, is answered once with a JSON 400 and the connection closed. Every flag is checked before a model
loads: one line on stderr naming the flag and its allowed range, exit status 2.

Python API (tests, benchmarks):
    with ModelServer([ModelEntry("bert", "/abs/export/bert")], ServerOptions(rest_api_port=0)) as server:
        RestClient(server.url).predict("bert", instances=["a sentence"])
"""

import argparse
import dataclasses
import logging
import os
import re
import signal
import threading
import urllib.parse

import tensorflow as tf
from google.protobuf import json_format

from commands.tf_startup import quiet_command
from commands.user_errors import OneLineParser, UserError, exit_status
from serving.server import json_tensor
from serving.server.generation import check_generation_inputs
from serving.server.grpc_service import make_grpc_server, signature_def_map, status_response
from serving.server.servable import ServingError
from serving.server.model_config import ModelEntry, read_model_config_list
from serving.server.manager import ModelManager
from serving.server.transport import RestHttpServer, TransportLimits

log = logging.getLogger(__name__)

PREDICTION_PATH = re.compile(r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                             r":(classify|regress|predict)", re.IGNORECASE)
STATUS_PATH = re.compile(r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?",
                         re.IGNORECASE)
API_PATH = re.compile(r"/v1/.*", re.IGNORECASE)
HTTP_CODES = {"OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504,
              "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403, "RESOURCE_EXHAUSTED": 429,
              "FAILED_PRECONDITION": 400, "ABORTED": 409, "OUT_OF_RANGE": 400, "UNIMPLEMENTED": 501,
              "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500, "UNAUTHENTICATED": 401}
MAX_VERSION = 2 ** 63 - 1
# name -> (low, high): the ranges of ServerOptions' numbers, checked in __post_init__ and by the CLI.
RANGES = {"rest_api_port": (0, 65535), "grpc_port": (0, 65535), "file_system_poll_wait_seconds": (0, 86400),
          "max_request_bytes": (1, 2 ** 31 - 1), "rest_api_num_threads": (1, 1024),
          "rest_api_timeout_in_ms": (1, 3_600_000), "max_instances_per_request": (1, 1_000_000),
          "max_new_tokens": (1, 1_000_000), "rest_api_header_timeout_in_ms": (1, 3_600_000),
          "rest_api_max_connections": (1, 100_000), "rest_api_max_connections_per_client": (1, 100_000),
          "rest_api_max_inflight_bytes": (1, 2 ** 40), "max_elements_per_request": (1, 2 ** 31 - 1)}


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """Args:
      rest_api_host: interface to bind (REST and gRPC); 127.0.0.1 keeps the server off the network.
      rest_api_port: REST port; 0 picks a free one (`ModelServer.rest_port` tells which).
      grpc_port: gRPC port; None: no gRPC; 0: a free one.
      file_system_poll_wait_seconds: how often base paths are polled for new versions; 0: once at start.
      enable_batching: merge concurrent predict calls of one signature.
      enable_signature_method_name_check: Classify/Regress require that method_name (TF Serving's flag).
      max_request_bytes: larger request bodies are refused (413 over REST, RESOURCE_EXHAUSTED over gRPC).
      rest_api_num_threads: REST worker threads (connections served at once; more wait in a queue).
      rest_api_timeout_in_ms: the longest wait for a REST client's next bytes or next keep-alive request.
      max_instances_per_request: the most instances / columnar rows / examples in one REST request.
      max_new_tokens: the largest `max_new_tokens` input (GPT generation length) a REST request may ask.
      rest_api_header_timeout_in_ms: the longest time for a REST request's headers (a new connection: from its
        accept); separate from the body timeout.
      rest_api_max_connections: open REST connections in all; more are refused at once (503).
      rest_api_max_connections_per_client: open REST connections from one IP address; more are refused (503).
      rest_api_max_inflight_bytes: REST request bodies held or served at once; a request over it gets 503.
      max_elements_per_request: the most tensor elements (all inputs together, as their shapes declare) of one
        gRPC Predict; a tensor whose values do not match its shape is refused whatever its size.
    """

    rest_api_host: str = "127.0.0.1"
    rest_api_port: int = 8501
    grpc_port: int | None = None
    file_system_poll_wait_seconds: float = 1.0
    enable_batching: bool = False
    enable_signature_method_name_check: bool = False
    max_request_bytes: int = 64 << 20
    rest_api_num_threads: int = 64
    rest_api_timeout_in_ms: int = 30_000
    max_instances_per_request: int = 1024
    max_new_tokens: int = 256
    rest_api_header_timeout_in_ms: int = 10_000
    rest_api_max_connections: int = 1024
    rest_api_max_connections_per_client: int = 512
    rest_api_max_inflight_bytes: int = 128 << 20
    max_elements_per_request: int = 1 << 24

    def __post_init__(self):
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if value is None and name == "grpc_port":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise ValueError(f"--{name} must be in {low}..{high}, got {value!r}")
        if not self.rest_api_host:
            raise ValueError("--rest_api_host must name an interface, got ''")


class RestApi:
    """Routes one REST request to the manager -> (HTTP status, JSON body). Never raises.

    Args:
      manager: the loaded models.
      options: the per-request bounds (`max_instances_per_request`, `max_new_tokens`).
    """

    def __init__(self, manager: ModelManager, options: "ServerOptions"):
        self.manager, self.options = manager, options

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if not API_PATH.fullmatch(path):
            return 404, json_tensor.dumps({"error": f"Not found: {path[:200]} (the API is under /v1/)"})
        try:
            return 200, self._dispatch(method, path, body)
        except ServingError as e:
            return HTTP_CODES.get(e.code, 500), json_tensor.dumps({"error": e.message})
        except Exception:
            log.exception("REST %s %s failed", method, path)
            return 500, json_tensor.dumps({"error": "Internal error; see the server log"})

    def _dispatch(self, method: str, path: str, body: bytes) -> bytes:
        malformed = ServingError("INVALID_ARGUMENT", f"Malformed request: {method} {path}")
        match = (PREDICTION_PATH if method == "POST" else STATUS_PATH).fullmatch(path)
        if method not in ("GET", "POST") or not match:
            raise malformed
        name, version, label, verb = match.groups()
        name = urllib.parse.unquote(name) if name else name
        label = urllib.parse.unquote(label) if label else None
        if version is not None:
            if int(version) > MAX_VERSION:
                raise ServingError("INVALID_ARGUMENT", f"Failed to convert version: {version} to numeric.")
            version = int(version)
        if method == "POST":
            return self._predict(name, version, label, body) if verb.lower() == "predict" else \
                self._examples(verb.lower(), name, version, label, body)
        if not name:
            raise ServingError("INVALID_ARGUMENT", "Missing model name in request.")
        if verb:
            return self._metadata(name, version, label)
        states = self.manager.status(name, version, label)
        return json_format.MessageToJson(status_response(states), preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True).encode("utf-8")

    def _predict(self, name, version, label, body) -> bytes:
        doc = json_tensor.parse(body)
        signature_name = json_tensor.signature_name(doc)
        servable = self.manager.servable(name, version, label)
        key = signature_name or "serving_default"
        signature = servable.signature_defs.get(key)
        if signature is None:
            raise ServingError("INVALID_ARGUMENT", f'Serving signature name: "{key}" not found in signature def')
        inputs, row = json_tensor.predict_inputs(doc, {alias: tf.dtypes.as_dtype(info.dtype)
                                                       for alias, info in signature.inputs.items()},
                                                 max_batch=self.options.max_instances_per_request)
        check_generation_inputs(inputs, self.options.max_new_tokens)
        return json_tensor.predict_response(servable.predict(key, inputs), row)

    def _examples(self, verb, name, version, label, body) -> bytes:
        doc = json_tensor.parse(body)
        signature_name = json_tensor.signature_name(doc)
        examples = json_tensor.examples(doc, verb, max_batch=self.options.max_instances_per_request)
        servable = self.manager.servable(name, version, label)
        if verb == "classify":
            return json_tensor.classify_response(servable.classify(signature_name, examples))
        return json_tensor.regress_response(servable.regress(signature_name, examples))

    def _metadata(self, name, version, label) -> bytes:
        servable = self.manager.servable(name, version, label)
        spec = {"name": servable.name, "signature_name": "", "version": str(servable.version)}
        signatures = json_format.MessageToDict(signature_def_map(servable), preserving_proto_field_name=True,
                                               always_print_fields_with_no_presence=True)
        return json_tensor.dumps({"model_spec": spec, "metadata": {"signature_def": signatures}})


class ModelServer:
    """Serves `models` over REST (and gRPC): loads them, polls their base paths, answers requests.

    Args:
      models: the models to serve (`model_config.read_model_config_list(path)` or `ModelEntry`s).
      options: ports, host, polling, batching, limits (`ServerOptions`).

    Example:
        server = ModelServer([ModelEntry("bert", "/abs/bert")], ServerOptions(rest_api_port=0))
        port = server.start()   # loads the models first, as TF Serving does before it listens
        ...
        server.stop()
    """

    def __init__(self, models: list[ModelEntry], options: ServerOptions = ServerOptions()):
        self.options = options
        self.manager = ModelManager(list(models), batching=options.enable_batching,
                                    method_check=options.enable_signature_method_name_check)
        self._http: RestHttpServer | None = None
        self._grpc = None
        self.rest_port = self.grpc_port = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://{self.options.rest_api_host}:{self.rest_port}"

    def start(self) -> int:
        """Binds, loads the models (first poll), starts serving and polling -> the REST port."""
        options = self.options
        limits = TransportLimits(options.rest_api_num_threads, options.rest_api_timeout_in_ms / 1000,
                                 options.max_request_bytes, options.rest_api_header_timeout_in_ms / 1000,
                                 options.rest_api_max_connections, options.rest_api_max_connections_per_client,
                                 options.rest_api_max_inflight_bytes)
        # bound first (a port in use fails before any model loads), served after the first poll
        self._http = RestHttpServer((options.rest_api_host, options.rest_api_port),
                                    RestApi(self.manager, options).handle, limits)
        self.manager.poll()
        self.rest_port = self._http.server_address[1]
        if options.grpc_port is not None:
            self._grpc, self.grpc_port = make_grpc_server(self.manager, options.rest_api_host, options.grpc_port,
                                                          options.max_request_bytes, options.max_new_tokens,
                                                          max_elements=options.max_elements_per_request)
        self._spawn(self._http.serve_forever, "rest")
        if options.file_system_poll_wait_seconds > 0:
            self._spawn(self._poll, "poll")
        return self.rest_port

    def _spawn(self, target, name: str) -> None:
        thread = threading.Thread(target=target, name=f"model-server-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _poll(self) -> None:
        while not self._stop.wait(self.options.file_system_poll_wait_seconds):
            try:
                self.manager.poll()
            except Exception:
                log.exception("polling the model base paths failed")

    def stop(self) -> None:
        self._stop.set()
        if self._http:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc:
            self._grpc.stop(grace=1).wait()
        for thread in self._threads:
            thread.join(timeout=10)

    def __enter__(self) -> "ModelServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(prog="python -m serving.server", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model_config_file", help="a model_config_list text proto (TF Serving's)")
    source.add_argument("--model_base_path", help="one model's base path (with --model_name)")
    parser.add_argument("--model_name", default="default", help="name of the model of --model_base_path")
    parser.add_argument("--rest_api_port", type=int, default=8501, help="0: a free port (printed)")
    parser.add_argument("--port", type=int, default=8500, help="gRPC port; 0: no gRPC")
    parser.add_argument("--rest_api_host", default="127.0.0.1", help="interface for REST and gRPC")
    parser.add_argument("--file_system_poll_wait_seconds", type=float, default=1.0)
    parser.add_argument("--enable_batching", action="store_true")
    parser.add_argument("--enable_signature_method_name_check", action="store_true",
                        help="Classify/Regress require a classify/regress method_name (TF2 SavedModels have none)")
    parser.add_argument("--max_request_bytes", type=int, default=ServerOptions.max_request_bytes)
    parser.add_argument("--rest_api_num_threads", type=int, default=ServerOptions.rest_api_num_threads,
                        help="REST worker threads")
    parser.add_argument("--rest_api_timeout_in_ms", type=int, default=ServerOptions.rest_api_timeout_in_ms,
                        help="longest wait for a slow REST client")
    for name in ("rest_api_header_timeout_in_ms", "rest_api_max_connections", "rest_api_max_connections_per_client",
                 "rest_api_max_inflight_bytes", "max_elements_per_request"):
        parser.add_argument(f"--{name}", type=int, default=getattr(ServerOptions, name))
    parser.add_argument("--max_instances_per_request", type=int, default=ServerOptions.max_instances_per_request)
    parser.add_argument("--max_new_tokens", type=int, default=ServerOptions.max_new_tokens,
                        help="largest generation length a request may ask for")
    return parser.parse_args(argv)


def _model_folders(folder: str) -> list[str]:
    """The folders in `folder` that hold version folders (models' base paths), sorted."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    found = [os.path.join(folder, n) for n in names]
    return sorted(f for f in found if os.path.isdir(f) and any(v.isdigit() for v in os.listdir(f)))


def base_path_hint(base_path: str) -> None:
    """Raises UserError when `base_path` has no version folders but models' base paths are one or two levels
    down: an export dir of `serving.export` (versions under `serving/<model>/`) or its `serving/` folder
    (versions under `<model>/`). The message names the base path to give, and the model config file."""
    if any(n.isdigit() for n in os.listdir(base_path)):
        return
    for folder, what in ((os.path.join(base_path, "serving"), "an export dir of serving.export"),
                         (base_path, "a folder of models' base paths")):
        models = _model_folders(folder)
        if models:
            config = os.path.join(folder, "models.config")
            raise UserError(f"--model_base_path {base_path} is {what}, not a model's base path (no version "
                            f"folders in it): give --model_base_path {models[0]}"
                            + (f" or --model_config_file {config}" if os.path.isfile(config) else ""))


def _models(args) -> list[ModelEntry]:
    """The models the flags name; ValueError (one line) for a missing or wrong path."""
    if args.model_config_file:
        if not os.path.isfile(args.model_config_file):
            raise ValueError(f"--model_config_file {args.model_config_file}: "
                             f"{'is a folder' if os.path.isdir(args.model_config_file) else 'no such file'}")
        return read_model_config_list(args.model_config_file)
    if not os.path.isdir(args.model_base_path):
        raise ValueError(f"--model_base_path {args.model_base_path}: "
                         f"{'is a file, not a folder' if os.path.exists(args.model_base_path) else 'no such folder'}")
    base_path_hint(args.model_base_path)
    if not args.model_name.strip():
        raise ValueError("--model_name must not be empty")
    return [ModelEntry(args.model_name, os.path.abspath(args.model_base_path))]


def _options(args) -> ServerOptions:
    """The flags' `ServerOptions`: each option's flag bears its name (TF Serving's), but for gRPC's `--port`,
    where 0 means no gRPC."""
    named = {f.name: getattr(args, f.name) for f in dataclasses.fields(ServerOptions) if f.name != "grpc_port"}
    return ServerOptions(grpc_port=args.port or None, **named)


@quiet_command
def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        models = _models(args)
        options = _options(args)
    except (OSError, ValueError) as e:  # a missing or wrong path, an option out of range: one line
        return exit_status(e if isinstance(e, UserError) else UserError(str(e)))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = ModelServer(models, options)
    try:
        server.start()
    except OSError as e:
        return exit_status(UserError(f"cannot listen on {options.rest_api_host}:{options.rest_api_port}: "
                                     f"{e.strerror or e}"))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    grpc_text = f" and gRPC {options.rest_api_host}:{server.grpc_port}" if server.grpc_port else ""
    print(f"Serving {server.manager.available()} on REST {server.url}{grpc_text}", flush=True)
    stop.wait()
    server.stop()
    print("Stopped.", flush=True)
    return 0
