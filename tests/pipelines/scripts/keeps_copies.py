"""A stand-in pipeline wrapper for script tests: what a script saves of the before-copies its calls keep."""


class KeepsCopies:
    """The pipeline, its results also holding copies from before face restoration and colour correction (as
    `save_images_before_face_restoration` / `..._color_correction` make them), to see what a plot saves."""

    def __init__(self, pipe):
        self.pipe = pipe

    def __getattr__(self, name):
        return getattr(self.pipe, name)

    def __call__(self, params, **kwargs):
        result = self.pipe(params, **kwargs)
        result.before_face_restoration = {0: result.images[0].copy()}
        result.before_color_correction = {0: result.images[0].copy()}
        return result
