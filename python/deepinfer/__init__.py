"""deepinfer's Python API: vLLM's offline interface over libdeepinfer.so (ctypes).

    from deepinfer import LLM, SamplingParams
    llm = LLM()                       # the embedded demo model unless a model is given
    for out in llm.generate(["Hello, my name is"], SamplingParams(temperature=0.8, top_p=0.95, seq_seed=0)):
        print(out.prompt, out.outputs[0].text)
"""
from . import _lib
from .llm import LLM, DeepInferError
from .outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from .sampling_params import SamplingParams

__version__ = _lib.lib.deepinfer_version().decode()
__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob", "RequestMetrics",
           "DeepInferError", "__version__"]
