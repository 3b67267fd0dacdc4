"""TF Serving's gRPC API over a ModelManager: PredictionService (Predict, GetModelMetadata, Classify, Regress,
MultiInference) and ModelService.GetModelStatus, with TF Serving's status codes (NOT_FOUND, INVALID_ARGUMENT, ...).

`make_grpc_server(manager, host, port, max_message_bytes)` -> (started grpc.Server, bound port). A Predict's
tensors are checked before any array is made: each one's values must match its shape (TF's parser would
repeat a short list's last value up to the shape), and all of them together hold at most `max_elements`
(`--max_elements_per_request`); otherwise INVALID_ARGUMENT.
"""

import logging
from concurrent import futures

import grpc
import tensorflow as tf
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2,
                                     inference_pb2, model_pb2, model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc, regression_pb2, status_pb2)

from serving.server.servable import CLASSIFY, REGRESS, ServingError, inputs_from_protos, serialized_examples
from serving.server.generation import check_generation_inputs
from serving.server.manager import ModelManager

log = logging.getLogger(__name__)
SIGNATURE_DEF = "signature_def"


def resolve(manager: ModelManager, spec):
    """A ModelSpec -> its Servable (latest, a version, or a label)."""
    choice = spec.WhichOneof("version_choice")
    return manager.servable(spec.name, spec.version.value if choice == "version" else None,
                            spec.version_label if choice == "version_label" else None)


def fill_spec(spec, servable, signature_name: str) -> None:
    spec.name, spec.signature_name = servable.name, signature_name
    spec.version.value = servable.version


def _guarded(method):
    """Turns ServingError into the gRPC status; anything else into INTERNAL, logged with its trace."""
    def handler(self, request, context):
        try:
            return method(self, request, context)
        except ServingError as e:
            context.abort(getattr(grpc.StatusCode, e.code), e.message)
        except Exception:
            log.exception("gRPC %s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method.__name__}; see the server log")
    handler.__name__ = method.__name__
    return handler


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):

    def __init__(self, manager: ModelManager, max_new_tokens: int = 256, max_elements: int | None = None):
        self.manager, self.max_new_tokens, self.max_elements = manager, max_new_tokens, max_elements

    @_guarded
    def Predict(self, request, context):
        servable = resolve(self.manager, request.model_spec)
        key, signature = servable.signature(request.model_spec.signature_name)
        inputs = inputs_from_protos(signature, request.inputs, self.max_elements)
        check_generation_inputs(inputs, self.max_new_tokens)
        outputs = servable.predict(key, inputs, tuple(request.output_filter))
        response = predict_pb2.PredictResponse()
        fill_spec(response.model_spec, servable, key)
        for alias, value in outputs.items():
            response.outputs[alias].CopyFrom(tf.make_tensor_proto(value))
        return response

    @_guarded
    def GetModelMetadata(self, request, context):
        if not request.metadata_field:
            raise ServingError("INVALID_ARGUMENT", "GetModelMetadataRequest must specify at least one "
                                                   "metadata_field")
        for field in request.metadata_field:
            if field != SIGNATURE_DEF:
                raise ServingError("INVALID_ARGUMENT", f"Metadata field {field} is not supported")
        servable = resolve(self.manager, request.model_spec)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        fill_spec(response.model_spec, servable, "")
        response.metadata[SIGNATURE_DEF].Pack(signature_def_map(servable))
        return response

    def _run_examples(self, request, method: str, response):
        """A Classify or Regress request (`method`: CLASSIFY, REGRESS) run on its model's signature: fills
        `response.model_spec`, returns the servable's rows, one an example."""
        servable = resolve(self.manager, request.model_spec)
        key, _ = servable.signature(request.model_spec.signature_name, method)
        fill_spec(response.model_spec, servable, key)
        run = servable.classify if method == CLASSIFY else servable.regress
        return run(key, serialized_examples(request.input))

    @_guarded
    def Classify(self, request, context):
        response = classification_pb2.ClassificationResponse()
        for row in self._run_examples(request, CLASSIFY, response):
            classes = response.result.classifications.add()
            for label, score in row:
                classes.classes.add(label=label, score=score)
        return response

    @_guarded
    def Regress(self, request, context):
        response = regression_pb2.RegressionResponse()
        for value in self._run_examples(request, REGRESS, response):
            response.result.regressions.add(value=value)
        return response

    @_guarded
    def MultiInference(self, request, context):
        """Classify and regress tasks of one model over one input, with TF Serving's checks and texts
        (multi_inference.cc); each task runs on its own here (TF Serving runs them in one session call)."""
        first = request.tasks[0].model_spec if request.tasks else model_pb2.ModelSpec()
        servable = resolve(self.manager, first)  # the first task's model, as TF Serving's helper picks it
        names, seen = {task.model_spec.name for task in request.tasks}, set()
        if "" in names:
            raise ServingError("INVALID_ARGUMENT", "Found ModelSpec with an empty model name.")
        if len(names) > 1:
            raise ServingError("INVALID_ARGUMENT", "All ModelSpecs in a MultiInferenceRequest must access the "
                                                   "same model name.")
        for task in request.tasks:
            key = task.model_spec.signature_name or "serving_default"
            if key in seen:
                raise ServingError("INVALID_ARGUMENT", f"Duplicate evaluation of signature: {key}")
            seen.add(key)
            if key not in servable.signature_defs:
                raise ServingError("INVALID_ARGUMENT", f"Requested signature not found in model graph: {key}")
            if task.method_name not in (CLASSIFY, REGRESS):
                raise ServingError("UNIMPLEMENTED", f"Unsupported signature method_name: {task.method_name}")
            servable.signature(key, task.method_name)
        examples = serialized_examples(request.input)
        response = inference_pb2.MultiInferenceResponse()
        for task in request.tasks:
            result = response.results.add()
            key = task.model_spec.signature_name or "serving_default"
            if task.method_name == CLASSIFY:
                for row in servable.classify(key, examples):
                    classes = result.classification_result.classifications.add()
                    for label, score in row:
                        classes.classes.add(label=label, score=score)
            else:
                for value in servable.regress(key, examples):
                    result.regression_result.regressions.add(value=value)
            fill_spec(result.model_spec, servable, task.model_spec.signature_name)
        return response


def signature_def_map(servable) -> get_model_metadata_pb2.SignatureDefMap:
    result = get_model_metadata_pb2.SignatureDefMap()
    for name, signature in servable.signature_defs.items():
        result.signature_def[name].CopyFrom(signature)
    return result


def status_response(states) -> get_model_status_pb2.GetModelStatusResponse:
    """VersionStates -> GetModelStatusResponse (shared with the REST status route)."""
    response = get_model_status_pb2.GetModelStatusResponse()
    codes = status_pb2.StatusProto.DESCRIPTOR.fields_by_name["error_code"].enum_type.values_by_name
    for state in states:
        entry = response.model_version_status.add(version=state.version)
        entry.state = get_model_status_pb2.ModelVersionStatus.State.Value(state.state)
        entry.status.error_code = codes[state.error_code].number
        entry.status.error_message = state.error_message
    return response


class ModelService(model_service_pb2_grpc.ModelServiceServicer):

    def __init__(self, manager: ModelManager):
        self.manager = manager

    @_guarded
    def GetModelStatus(self, request, context):
        spec = request.model_spec
        choice = spec.WhichOneof("version_choice")
        return status_response(self.manager.status(spec.name, spec.version.value if choice == "version" else None,
                                                   spec.version_label if choice == "version_label" else None))


def make_grpc_server(manager: ModelManager, host: str, port: int, max_message_bytes: int,
                     max_new_tokens: int = 256, threads: int = 16,
                     max_elements: int | None = None) -> tuple[grpc.Server, int]:
    options = [("grpc.max_receive_message_length", max_message_bytes),
               ("grpc.max_send_message_length", -1)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads), options=options)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(manager, max_new_tokens, max_elements), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(manager), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise OSError(f"cannot bind gRPC to {host}:{port}")
    server.start()
    return server, bound
