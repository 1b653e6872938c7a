#!/usr/bin/env python3
"""ONNX's own backend node tests (Debian's libonnx-testdata) through the real `tfpin infer`.

Every case whose operators the importer supports must match ONNX's expected outputs within ONNX's
backend-test tolerances (rtol 1e-3, atol 1e-7), or be in REFUSED below with the reason its
refusal must give (exit 2). Every case with another operator must be refused with exit 2 naming
that operator. The counts are printed.
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

TFPIN = os.environ.get("TFPIN_EXE", "tfpin")
NODE_DIR = Path(os.environ.get("ONNX_NODE_TESTS", "/usr/share/libonnx-testdata/data/node"))
RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test's defaults

# Cases of supported operators that the engine cannot compute exactly: the message fragment their
# refusal (exit 2) must carry -> the cases. A listed case that starts to pass fails the test, so the
# list stays true.
REFUSED_BY_REASON = {
    # Clip with min > max (Debian unstable's test data): refused by the engine's own check
    'expected min <= max': ['test_clip_min_greater_than_max'],
    # Pad's axes input (opset 18; Debian 13's test data)
    'the axes input (opset 18)': ['test_constant_pad_axes', 'test_constant_pad_negative_axes'],
    # tensors of rank 1, 3 or 5 into other than elementwise operators
    'the engine computes on N,C,H,W images and N,C matrices': [
        'test_add_bcast', 'test_mul_bcast',
    ],
    # integer data (uint8, int8, int32)
    'tfpin reads float32': [
        'test_add_int16', 'test_add_int8', 'test_add_uint16', 'test_add_uint32', 'test_add_uint64',
        'test_add_uint8', 'test_clip_default_int8_inbounds',
        'test_clip_default_int8_inbounds_expanded', 'test_clip_default_int8_max',
        'test_clip_default_int8_min', 'test_edge_pad', 'test_maxpool_2d_uint8', 'test_mul_int16',
        'test_mul_int8', 'test_mul_uint16', 'test_mul_uint32', 'test_mul_uint64', 'test_mul_uint8',
        'test_reflect_pad', 'test_wrap_pad',
    ],
    # 1-D and 3-D pooling
    'only 2-D pooling on N,C,H,W images': [
        'test_averagepool_1d_default', 'test_averagepool_3d_default',
        'test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False',
        'test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True',
        'test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False',
        'test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True',
        'test_averagepool_3d_dilations_small', 'test_maxpool_1d_default', 'test_maxpool_3d_default',
        'test_maxpool_3d_dilations', 'test_maxpool_3d_dilations_use_ref_impl',
        'test_maxpool_3d_dilations_use_ref_impl_large',
    ],
    # training mode (batch statistics, random dropout)
    'training_mode': [
        'test_batchnorm_epsilon_training_mode', 'test_batchnorm_example_training_mode',
        'test_training_dropout', 'test_training_dropout_default',
        'test_training_dropout_zero_ratio',
    ],
    # softmax or concat along another axis than the channels
    'only the channels (axis 1': [
        'test_concat_1d_axis_0', 'test_concat_1d_axis_negative_1', 'test_concat_2d_axis_0',
        'test_concat_2d_axis_negative_2', 'test_concat_3d_axis_0', 'test_concat_3d_axis_1',
        'test_concat_3d_axis_2', 'test_concat_3d_axis_negative_1', 'test_concat_3d_axis_negative_2',
        'test_concat_3d_axis_negative_3', 'test_softmax_axis_0', 'test_softmax_axis_1',
        'test_softmax_axis_2', 'test_softmax_default_axis', 'test_softmax_negative_axis',
    ],
    # a constant as the graph's output (nothing to compute)
    'is a constant; the engine': [
        'test_constant',
    ],
    # padding with a value other than zero
    'only non-negative zero padding': [
        'test_constant_pad',
    ],
    # an input passed through as the output (nothing to compute)
    'is a graph input; the engine': [
        'test_clip_default_inbounds_expanded', 'test_dropout_default', 'test_dropout_default_old',
        'test_dropout_default_ratio', 'test_dropout_random_old', 'test_identity',
        'test_sum_one_input',
    ],
    # a second output (dropout mask, pooling indices) in use
    'the engine computes only the first': [
        'test_dropout_default_mask', 'test_dropout_default_mask_ratio',
        'test_maxpool_with_argmax_2d_precomputed_pads', 'test_training_dropout_default_mask',
        'test_training_dropout_mask', 'test_training_dropout_zero_ratio_mask',
    ],
    # reshapes other than a flatten to N,C*H*W
    'only N,C,H,W to N,C*H*W': [
        'test_flatten_axis0', 'test_flatten_axis2', 'test_flatten_axis3',
        'test_flatten_negative_axis1', 'test_flatten_negative_axis2', 'test_flatten_negative_axis4',
        'test_reshape_allowzero_reordered', 'test_reshape_extended_dims',
        'test_reshape_negative_dim', 'test_reshape_negative_extended_dims', 'test_reshape_one_dim',
        'test_reshape_reduced_dims', 'test_reshape_reordered_all_dims',
        'test_reshape_reordered_last_dims', 'test_reshape_zero_and_negative_dim',
        'test_reshape_zero_dim', 'test_squeeze', 'test_squeeze_negative_axes',
        'test_unsqueeze_axis_0', 'test_unsqueeze_axis_1', 'test_unsqueeze_axis_2',
        'test_unsqueeze_axis_3', 'test_unsqueeze_negative_axes', 'test_unsqueeze_three_axes',
        'test_unsqueeze_two_axes', 'test_unsqueeze_unsorted_axes',
    ],
    # Gemm with a transposed A
    'transA=1': [
        'test_gemm_all_attributes', 'test_gemm_transposeA',
    ],
    # sequence and optional types
    'is not a tensor': [
        'test_identity_opt', 'test_identity_sequence',
    ],
    # batched (3-D, 4-D) MatMul
    'only 2-D MatMul': [
        'test_matmul_1d_1d', 'test_matmul_1d_3d', 'test_matmul_3d', 'test_matmul_4d',
        'test_matmul_4d_1d', 'test_matmul_bcast',
    ],
    # dilated max pooling
    'dilated pooling': [
        'test_averagepool_2d_dilations', 'test_maxpool_2d_dilations',
    ],
    # column-major pooling indices
    'storage_order=1': [
        'test_maxpool_with_argmax_2d_precomputed_strides',
    ],
}
REFUSED = {case: reason for reason, cases in REFUSED_BY_REASON.items() for case in cases}


def load_pb(path):
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return tensor


def numbered(folder, kind):
    """input_0.pb, input_1.pb, ... in numeric order."""
    return sorted(folder.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))


def ops_of(model):
    return {node.op_type for node in model.graph.node}


def supported_ops():
    """The importer's list, from a refusal message (one source of truth: the importer)."""
    with tempfile.TemporaryDirectory() as tmp:
        model = onnx.helper.make_model(onnx.helper.make_graph(
            [onnx.helper.make_node("NoSuchOp", ["x"], ["y"])], "g",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 1])]))
        path = Path(tmp) / "m.onnx"
        onnx.save(model, path)
        r = subprocess.run([TFPIN, "infer", "--model", str(path), "--output", str(Path(tmp) / "y.npy")],
                           capture_output=True, text=True, timeout=60)
    match = re.search(r"operator NoSuchOp is not supported \(supported: ([^)]*)\)", r.stderr)
    assert match, r.stderr
    return set(match.group(1).split(", "))


class NodeTests(unittest.TestCase):
    def test_backend_node_cases(self):
        if not NODE_DIR.is_dir():
            self.skipTest(f"{NODE_DIR} missing (libonnx-testdata)")
        supported = supported_ops()
        self.assertIn("Conv", supported)
        counts = {"passed": 0, "refused as listed": 0, "unsupported operator refused": 0}
        problems = []
        seen_refused = set()
        cases = sorted(p for p in NODE_DIR.iterdir() if (p / "model.onnx").exists())
        self.assertGreater(len(cases), 100)
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            for case in cases:
                model = onnx.load(case / "model.onnx")
                ops = ops_of(model)
                data = case / "test_data_set_0"
                argv = [TFPIN, "infer", "--model", str(case / "model.onnx"), "--threads", "1"]
                expected = []
                missing = sorted(ops - supported)
                # An unsupported operator is refused before inputs are read: none are given (some
                # of those cases' inputs are sequences or optionals, not tensors).
                for i, name in enumerate([] if missing else numbered(data, "input")):
                    try:
                        array = numpy_helper.to_array(load_pb(name))
                    except ValueError:
                        break  # a sequence or optional: the model's input type is refused first
                    file = tmp / f"in{i}.npy"
                    np.save(file, array)  # non-float32 arrays too: they must be refused clearly
                    argv += ["--input", str(file)]
                for i, name in enumerate(numbered(data, "output")):
                    if not missing:
                        try:
                            expected.append(numpy_helper.to_array(load_pb(name)))
                        except ValueError:
                            expected.append(None)  # not a tensor: the case must be refused
                    argv += ["--output", str(tmp / f"out{i}.npy")]
                for stale in tmp.glob("out*.npy"):
                    stale.unlink()
                r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
                if r.returncode not in (0, 2):
                    problems.append(f"{case.name}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
                    continue
                if missing:
                    if r.returncode != 2 or not re.search(
                            r"operator (\w+) is not supported|domain '[\w.]*' is not supported", r.stderr):
                        problems.append(f"{case.name}: ops {missing} unsupported but exit "
                                        f"{r.returncode}: {r.stderr.strip()[-300:]}")
                    else:
                        counts["unsupported operator refused"] += 1
                    continue
                if case.name in REFUSED:
                    seen_refused.add(case.name)
                    if r.returncode == 2 and REFUSED[case.name] in r.stderr:
                        counts["refused as listed"] += 1
                    else:
                        problems.append(f"{case.name}: listed as refused ({REFUSED[case.name]!r}) but exit "
                                        f"{r.returncode}: {r.stderr.strip()[-300:]}")
                    continue
                if r.returncode != 0:
                    problems.append(f"{case.name}: exit 2: {r.stderr.strip()[-400:]}")
                    continue
                wrong = []
                for i, want in enumerate(expected):
                    if want is None:
                        wrong.append(f"output {i} is not a tensor, yet the case ran")
                        continue
                    got = np.load(tmp / f"out{i}.npy")
                    if got.shape != want.shape:
                        wrong.append(f"output {i} shape {got.shape} != {want.shape}")
                        continue
                    try:
                        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
                    except AssertionError as e:
                        wrong.append(f"output {i}: {str(e).strip().splitlines()[2:5]}")
                if wrong:
                    problems.append(f"{case.name}: wrong: {wrong}")
                else:
                    counts["passed"] += 1
        # Cases of another ONNX release's test data (Debian 13 has more) may be absent here.
        not_seen = sorted(c for c in set(REFUSED) - seen_refused if (NODE_DIR / c).is_dir())
        print(f"ONNX node tests in {NODE_DIR}: {len(cases)} cases: "
              + ", ".join(f"{v} {k}" for k, v in counts.items())
              + f"; {len(problems)} problems", file=sys.stderr)
        self.assertEqual(problems, [], "\n".join(problems))
        self.assertEqual(not_seen, [], "REFUSED lists cases that were not run as such")


if __name__ == "__main__":
    # Where oneDNN cannot run on this CPU the engine refuses: skip, with the reason.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from onednn_usable import exit_if_onednn_unusable  # noqa: E402
    exit_if_onednn_unusable(TFPIN)
    unittest.main(verbosity=2)
