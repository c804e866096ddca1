"""The metric of this bundled task, in the released task-package contract."""

import numpy as np


class Metric:  # <<class_line>>
    def __init__(self):
        self.higher_is_better = True  # <<higher_is_better>>

    def validate_submission(self, submission, ground_truth):
        if list(submission.columns) != ["id", "target"]:  # <<columns_check>>
            raise ValueError("submission columns must be ['id', 'target']")  # <<columns_error>>
        if len(submission) != len(ground_truth):
            raise ValueError("submission must have one row per test row")

    def evaluate(self, y_true, y_pred):
        y_pred = y_pred.set_index("id").loc[y_true["id"]].reset_index()
        return float(np.mean(y_true["target"] == y_pred["target"]))  # <<evaluate>>
