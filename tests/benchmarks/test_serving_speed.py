"""The serving benchmark's own logic: arguments, round sizes, best-of columns, ratios, tables."""

import contextlib
import io
import json
from pathlib import Path
from unittest import mock

import numpy as np
import tensorflow as tf

from benchmarks import serving_speed, serving_workers
from tests.fixtures import TestCase


def _rows(table: str) -> dict[str, list[str]]:
    rows = [line.strip("| ").split(" | ") for line in table.splitlines()[2:]]
    return {row[0]: row for row in rows}


class ServingSpeedTest(TestCase):

    def test_choices_keep_order_and_refuse_unknown_values_by_flag(self):
        self.assertEqual(serving_speed.parse_choices("base,minilm", ("minilm", "base"), "models"),
                         ["base", "minilm"])
        with self.assertRaisesRegex(ValueError, r"--models: unknown value\(s\) large; "
                                                r"expected some of minilm, base"):
            serving_speed.parse_choices("minilm,large", ("minilm", "base"), "models")
        with self.assertRaisesRegex(ValueError, r"--parts: unknown value\(s\) \(none\)"):
            serving_speed.parse_choices(",", serving_speed.PARTS, "parts")

    def test_a_round_lasts_about_its_seconds_and_holds_one_call_at_least(self):
        self.assertEqual(serving_speed.calls_for(0.02, 1.5), 75)
        self.assertEqual(serving_speed.calls_for(4.0, 1.5), 1)
        self.assertEqual(serving_speed.calls_for(0.6, 1.5), 2)

    def test_percentile_is_nearest_rank(self):
        values = [5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0]
        self.assertEqual(serving_speed.percentile(values, 0.9), 9.0)
        self.assertEqual(serving_speed.percentile(values, 0.5), 5.0)
        self.assertEqual(serving_speed.percentile([2.0], 0.9), 2.0)
        with self.assertRaisesRegex(ValueError, "share"):
            serving_speed.percentile(values, 0.0)

    def test_summary_takes_each_columns_best_and_divides_ours_by_ort(self):
        # Seconds per call over three rounds; the medians are 0.02, 0.025, 0.04, 0.01, 0.05.
        seconds = {("minilm", 1, "ours"): [0.02, 0.021, 0.019],
                   ("minilm", 1, "ours_xla"): [0.025, 0.025, 0.03],
                   ("minilm", 1, "ort"): [0.04, 0.04, 0.05],
                   ("minilm", 1, "ort_int8"): [0.01, 0.01, 0.01],
                   ("minilm", 1, "hf_torch"): [0.05, 0.05, 0.05],
                   ("minilm", 32, "ours"): [2.0, 2.0, 2.0],
                   ("minilm", 32, "ours_xla"): [1.0, 1.0, 1.0],
                   ("minilm", 32, "ort"): [1.6, 1.6, 1.6],
                   ("minilm", 32, "ort_nospin"): [0.8, 0.8, 0.8]}
        rows = _rows(serving_speed.summary_table(serving_speed.rates_from(seconds)))
        batch_1 = rows["MiniLM L6/H384, batch 1"]
        self.assertEqual(batch_1[1:], ["50.0 (load_encoder)", serving_speed.NOT_MEASURED,
                                       "25.0", "100.0", "20.0", "2.00x", "-"])
        batch_32 = rows["MiniLM L6/H384, batch 32"]
        # XLA's 32/s beats plain 16/s.
        self.assertEqual(batch_32[1], "32.0 (load_encoder + XLA)")
        self.assertEqual(batch_32[3], "40.0 (no spinning)")  # beats its spinning 20/s
        self.assertEqual(batch_32[4], serving_speed.NOT_MEASURED)
        self.assertEqual(batch_32[6], "0.80x")

    def test_int8_ratio_divides_ours_int8_by_ort_int8(self):
        rates = {("base", 32): {"ours_int8": 30.0, "ours_int8_xla": 20.0, "ort": 8.0,
                                "ort_int8": 24.0, "ours": 9.0}}
        row = serving_speed.summary_rows(rates)[0]
        self.assertEqual(row[0], "BERT-Base size L12/H768, batch 32")
        self.assertEqual(row[2], "30.0 (load_encoder)")
        self.assertEqual(row[-2:], ["1.12x", "1.25x"])

    def test_the_fastest_of_our_paths_wins_its_column_and_the_load_is_shown(self):
        rates = {("minilm", 1): {"ours": 40.0, "ours_saved_xla": 45.0, "litert": 50.0,
                                 "ours_int8": 30.0, "litert_int8": 20.0, "ort": 40.0,
                                 "ort_int8": 60.0}}
        row = serving_speed.summary_rows(rates, {("minilm", 1): [9.0, 3.0, 4.0]})[0]
        self.assertEqual(row[1:3], ["50.0 (LiteRT)", "30.0 (load_encoder)"])
        self.assertEqual(row[-3:], ["1.25x", "0.50x", "4.0"])
        header = serving_speed.summary_table(rates, {("minilm", 1): [1.0]}).splitlines()[0]
        self.assertTrue(header.endswith("| load average (1 min) |"))

    def test_latency_and_accuracy_tables_say_what_is_unavailable(self):
        latency = _rows(serving_speed.latency_table(
            {"ours": [0.004, 0.002, 0.003], "ours_int8": None}))
        self.assertEqual(latency["ours float32"][1:], ["3.00", "4.00", "3"])
        self.assertEqual(latency["ours int8"][1], serving_speed.UNAVAILABLE)
        accuracy = _rows(serving_speed.accuracy_table(
            {"ours": 0.8125, "ort_int8": 0.8, "ours_int8": None},
            {"ours": 0.8125, "hf_torch": 0.81}))
        self.assertEqual(accuracy["ours float32"][1:], ["ours", "81.2", "81.2"])
        self.assertEqual(accuracy["ORT fused + int8"][1:],
                         ["Hugging Face PyTorch", "80.0", "81.0"])
        self.assertEqual(accuracy["ours int8"][2], serving_speed.UNAVAILABLE)
        same_weights = _rows(serving_speed.accuracy_table(
            {"litert_int8": 0.9, "ort": 0.91}, {"ours": 0.91, "hf_torch": 0.91},
            peer_trainer="ours (its Hugging Face export)"))
        self.assertEqual(same_weights["LiteRT dynamic-range int8 (XNNPACK)"][1:],
                         ["ours", "90.0", "91.0"])
        self.assertEqual(same_weights["ORT fused"][1], "ours (its Hugging Face export)")

    def test_command_shows_paths_inside_the_repository_relative_to_it(self):
        root = Path("/somewhere/repo")
        command = serving_speed.command_line(
            [str(root / "benchmarks" / "serving_speed.py"), "--rounds=3"],
            str(root / ".venv-bench" / "bin" / "python"), root)
        self.assertEqual(command, ".venv-bench/bin/python benchmarks/serving_speed.py --rounds=3")
        self.assertEqual(serving_speed.command_line(["x.py"], "/usr/bin/python3", root),
                         "python3 x.py")

    def test_command_shows_a_folder_outside_the_repository_as_a_variable(self):
        root = Path("/somewhere/repo")
        command = serving_speed.command_line(
            ["x.py", "--glue_dir=/data/glue", f"--name={root / 'out'}", "--rounds=3"],
            "/usr/bin/python3", root)
        self.assertEqual(command, "python3 x.py --glue_dir=$GLUE_DIR --name=out --rounds=3")

    def test_report_holds_every_section_and_the_machine(self):
        results = {"encoder": {("minilm", 1, "ours"): [0.02], ("minilm", 1, "ort"): [0.04]},
                   "encoder_cpu": {("minilm", 1, "ours"): [0.03], ("minilm", 1, "ort"): [0.05]},
                   "latency": {"ours": [0.01]}, "accuracy": {"ours": 0.8},
                   "reported": {"ours": 0.8, "hf_torch": 0.79},
                   "notes": {"ours int8 (encoder)": "quantized nothing"}}
        text = serving_speed.report(results, {"cpu": "Some CPU", "load average": "1, 2, 3"})
        for expected in ("## Machine", "- cpu: Some CPU", "## Encoder throughput",
                         "## End-to-end latency", "## Accuracy", "## Every encoder measurement",
                         "- ours int8 (encoder): quantized nothing", "2.00x",
                         "| 20.0 | 30.0 | 1 |"):  # ms per call, CPU ms per call, rounds
            self.assertIn(expected, text)
        self.assertNotIn("baseline", text)

    def test_baseline_rows_compare_the_better_of_plain_and_xla(self):
        rates = {("base", 1): {"ours": 8.0, "ours_xla": 9.0, "baseline": 6.0,
                               "baseline_xla": 4.0, "ort": 7.0},
                 ("base", 32): {"ours": 8.0, "ort": 7.0}}  # no baseline measured
        rows = _rows(serving_speed.baseline_table(rates))
        self.assertEqual(list(rows), ["BERT-Base size L12/H768, batch 1"])
        self.assertEqual(rows["BERT-Base size L12/H768, batch 1"][1:], ["6.0", "9.0", "1.50x"])


class ServingWorkersTest(TestCase):

    def test_encoder_systems_and_batches_can_be_chosen_and_the_baseline_follows_them(self):
        """--systems=ours --batches=1 --baseline times ours and the baseline's plain encoder
        only, at batch 1."""
        asked = []

        class FakeWorker:
            ready = {"per_call": {"1": 0.5, "32": 4.0}}

            def __init__(self, name):
                self.name = name

            def ask(self, request):
                asked.append((self.name, request["batch"]))
                return {"seconds": 0.5 * request["calls"], "cpu_seconds": request["calls"]}

            def close(self):
                pass

        def start(names, spec, log_dir, notes):
            return {name: FakeWorker(name) for name in names}

        with mock.patch.object(serving_speed, "start_workers", side_effect=start), \
                contextlib.redirect_stdout(io.StringIO()):
            seconds, cpu, loads = serving_speed.measure_encoders(
                "minilm", Path("folder"), Path("onnx"), 2, Path("logs"), {}, "before",
                systems=["ours"], batches=[1])
        self.assertEqual(asked, [("ours", 1), ("baseline", 1)] * 2)
        self.assertEqual(seconds[("minilm", 1, "baseline")], [0.5, 0.5])
        self.assertEqual(cpu[("minilm", 1, "ours")], [1.0, 1.0])
        self.assertEqual(len(loads[("minilm", 1)]), 2)  # one load average per round
        with self.assertRaisesRegex(ValueError, r"--systems: unknown value\(s\) baseline"):
            serving_speed.parse_choices("ours,baseline", serving_speed.ENCODER_SYSTEMS,
                                        "systems")

    def test_every_process_times_the_same_inputs(self):
        first, second = serving_workers.encoder_inputs(3), serving_workers.encoder_inputs(3)
        for name in serving_workers.ONNX_INPUTS:
            self.assertAllEqual(first[name], second[name])
            self.assertEqual(first[name].shape, (3, serving_workers.SEQUENCE_LENGTH))
            self.assertEqual(first[name].dtype, np.int64)
        self.assertGreaterEqual(first["input_ids"].min(), 1)
        self.assertLess(first["input_ids"].max(), serving_workers.VOCAB)
        self.assertAllEqual(first["token_type_ids"][:, :64], np.zeros((3, 64)))
        self.assertAllEqual(first["token_type_ids"][:, 64:], np.ones((3, 64)))

    def test_encoder_rounds_time_their_calls_after_one_untimed_call(self):
        calls = []
        ticks, cpu_ticks = iter([10.0, 13.0, 20.0, 21.0]), iter([1.0, 7.0, 8.0, 10.0])
        answers = list(serving_workers.encoder_answers(
            lambda arrays: calls.append(arrays["input_ids"].shape[0]),
            [{"batch": 1, "calls": 3}, {"batch": 2, "calls": 1}], timer=lambda: next(ticks),
            cpu_timer=lambda: next(cpu_ticks)))
        self.assertEqual(calls, [1, 1, 1, 1, 2, 2])
        self.assertEqual(answers, [{"seconds": 3.0, "cpu_seconds": 6.0},
                                   {"seconds": 1.0, "cpu_seconds": 2.0}])

    def test_text_rounds_walk_the_dev_set_and_accuracy_scores_all_of_it(self):
        seen = []

        def classify(texts):
            seen.append(list(texts))
            return ["1" if "good" in text else "0" for text in texts]

        texts, labels = ["good", "bad", "good too"], ["1", "0", "0"]
        ticks = iter(float(tick) for tick in range(100))
        latency, accuracy = serving_workers.text_answers(
            classify, texts, labels, [{"op": "latency", "start": 2, "calls": 2},
                                      {"op": "accuracy"}], timer=lambda: next(ticks))
        self.assertEqual(latency, {"seconds": [1.0, 1.0]})
        self.assertEqual(seen[:3], [["good too"], ["good too"], ["good"]])  # untimed, then 2, 3
        self.assertEqual(accuracy, {"accuracy": 2 / 3, "count": 3})

    def test_an_int8_build_that_fails_is_reported_unavailable_and_others_raise(self):
        def broken(spec):
            raise RuntimeError("no int8 kernel\nsecond line")

        builders = {("ours", "encoder"): broken, ("ort", "encoder"): broken}
        with mock.patch.dict(serving_workers.BUILDERS, builders):
            output = io.StringIO()
            with contextlib.redirect_stdout(output):
                serving_workers.serve({"system": "ours", "kind": "encoder", "int8": True})
            self.assertEqual(json.loads(output.getvalue()), {
                "available": False, "note": "int8 failed: RuntimeError: no int8 kernel"})
            for spec in ({"system": "ours", "kind": "encoder", "int8": False},
                         {"system": "ort", "kind": "encoder", "int8": True}):
                with self.assertRaisesRegex(RuntimeError, "no int8 kernel"):
                    serving_workers.serve(spec)

    def test_dev_set_reader_skips_the_header(self):
        path = self.tmp_path() / "dev.tsv"
        path.write_text("sentence\tlabel\na fine film\t1\ndull\t0\n", encoding="utf-8")
        self.assertEqual(serving_workers.read_dev_set(str(path)),
                         (["a fine film", "dull"], ["1", "0"]))


if __name__ == "__main__":
    tf.test.main()
