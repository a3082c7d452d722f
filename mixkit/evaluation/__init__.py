"""Independent evaluation of mixkit's tiny models on the shapes world (issue 7).

The attribute judge is a small CNN trained only on clean renderer images; `score_images` checks
generated images against their prompts with it, `score_captions` checks a captioner against the
true scenes. Importing this package imports torch (the judge is a torch module).
"""

from mixkit.evaluation.judge_io import load_judge, load_shipped_judge, save_judge
from mixkit.evaluation.judge_model import AttributeJudge, JudgeConfig, scene_labels
from mixkit.evaluation.judge_training import JudgeTrainingConfig, train_judge
from mixkit.evaluation.scoring import judge_predict, score_images
from mixkit.evaluation.tiny_eval import EvalPrompt, eval_prompts, evaluate_generator, round_trip, score_captions

__all__ = [
    "AttributeJudge",
    "EvalPrompt",
    "JudgeConfig",
    "JudgeTrainingConfig",
    "eval_prompts",
    "evaluate_generator",
    "judge_predict",
    "load_judge",
    "load_shipped_judge",
    "round_trip",
    "save_judge",
    "scene_labels",
    "score_captions",
    "score_images",
    "train_judge",
]
