"""Backends that stand in for a loaded model in evaluation tests."""


class ListBackend:
    """Completes each prompt with `completions(prompt, count)` and hands them over as one batch, as the vLLM backend
    does (the HF backend hands over each of its batches)."""

    def set_seed(self, seed):
        pass

    def completions(self, prompt, count: int) -> list[str]:
        raise NotImplementedError

    def generate(self, prompts, counts, on_completions=None):
        outputs = [self.completions(prompt, count) for prompt, count in zip(prompts, counts, strict=True)]
        if on_completions is not None:
            on_completions([(index, text) for index, texts in enumerate(outputs) for text in texts])
        return outputs
