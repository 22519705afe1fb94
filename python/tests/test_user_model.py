"""The user's own model (`model.name == "python"`): built by its factory, checked on the Dataset's first batch, timed in three stages."""

from __future__ import annotations

import json
import sys
import unittest
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PYTHON_DIR))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stallscope_peer.protocol import RequestError, parse_request  # noqa: E402
from test_harness import USER_DATASET, loader, request, run_harness  # noqa: E402

SOURCE = {"kind": "python", "factory": "my_dataset:make_dataset", "path": [str(USER_DATASET)],
          "args": {"samples": 24, "features": 8, "classes": 4}}


def model(factory: str = "my_model:make_model", **args) -> dict:
    return {"name": "python", "factory": factory, "path": [str(USER_DATASET)],
            "args": {"features": 8, "hidden": 5, "classes": 4, **args}}


def user_request(m: dict, modes=("whole_run", "diagnostic")) -> dict:
    return request(SOURCE, m, None, modes=modes, shuffle=False, epochs=1,
                   optimizer={"name": "sgd", "lr": 0.01}, loader=loader(batch_size=8))


def lines(req: dict) -> tuple[int, list[dict], str]:
    rc, out, err = run_harness(req)
    return rc, [json.loads(x) for x in out], err


class UserModel(unittest.TestCase):
    def test_user_model_trains_in_three_stages_and_says_what_it_built(self) -> None:
        rc, got, err = lines(user_request(model()))
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual([x["type"] for x in got], ["hello", "epoch", "epoch", "done"])
        hello = got[0]
        # MyNet(8, 5, 4): 8·5 + 5 + 5·4 + 4.
        self.assertEqual(hello["parameters"], 69)
        self.assertEqual(hello["model"], {"class": "MyNet", "loss": "cross_entropy", "optimizer": "SGD",
                                          "lr": 0.01})
        self.assertEqual(hello["sample_shape"], [8])
        diag = got[2]
        self.assertEqual(diag["mode"], "diagnostic")
        self.assertEqual(diag["steps"], 3)
        for key in ("next_wait_ns", "transfer_ns", "compute_ns"):
            self.assertEqual(len(diag[key]), 3, key)
        self.assertTrue(all(ns > 0 for ns in diag["compute_ns"]), diag["compute_ns"])

    def test_user_model_with_its_own_loss_and_optimizer(self) -> None:
        rc, got, err = lines(user_request(model("my_model:make_model_with_optimizer", lr=0.2),
                                          modes=("whole_run",)))
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(got[0]["model"], {"class": "MyNet", "loss": "CrossEntropyLoss",
                                           "optimizer": "SGD", "lr": 0.2})

    def test_user_model_that_cannot_take_the_batch_is_one_clear_error(self) -> None:
        rc, got, _ = lines(user_request(model(features=784)))
        self.assertEqual(rc, 1)
        self.assertEqual(len(got), 1, got)  # no hello: nothing was timed
        e = got[0]
        self.assertEqual((e["type"], e["stage"]), ("error", "setup"))
        msg = e["message"]
        self.assertTrue(msg.startswith("model my_model:make_model (MyNet) cannot take the Dataset's "
                                       "batch: input float32[8, 8], labels int64[8]; its first layer "
                                       "Linear takes [N, 784]; RuntimeError: mat1 and mat2 shapes "
                                       "cannot be multiplied (8x8 and 784x5)"), msg)

    def test_user_model_whose_output_does_not_fit_the_labels(self) -> None:
        rc, got, _ = lines(user_request(model(classes=2)))
        self.assertEqual(rc, 1)
        msg = got[0]["message"]
        self.assertIn("model my_model:make_model (MyNet): its output float32[8, 2] does not fit the "
                      "loss cross_entropy with the Dataset's labels int64[8] (input float32[8, 8])", msg)

    def test_user_model_factory_problems_name_the_factory(self) -> None:
        for m, needle in [
            (model("no_such_module:make"), "model no_such_module:make: cannot import 'no_such_module'"),
            (model("my_model:nothing"), "model my_model:nothing: 'my_model' has no function 'nothing'"),
            (model("my_model:parameters"), "model my_model:parameters: returned int, not a torch.nn.Module"),
            (model(bogus=1), "model my_model:make_model: the factory raised TypeError"),
        ]:
            rc, got, _ = lines(user_request(m, modes=("whole_run",)))
            self.assertEqual(rc, 1, needle)
            self.assertIn(needle, got[-1]["message"])

    def test_user_model_request_is_checked(self) -> None:
        base = user_request(model())
        parsed = parse_request(json.dumps(base))
        self.assertEqual(parsed.model["factory"], "my_model:make_model")
        for change, needle in [
            ({"factory": "nocolon"}, "request.model.factory: expected 'module:function'"),
            ({"args": [1]}, "request.model.args: expected an object"),
            ({"extra": 1}, "extra"),
        ]:
            bad = dict(base, model=dict(base["model"], **change))
            with self.assertRaises(RequestError) as cx:
                parse_request(json.dumps(bad))
            self.assertIn(needle, str(cx.exception))


if __name__ == "__main__":
    unittest.main()
