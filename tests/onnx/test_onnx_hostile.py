#!/usr/bin/env python3
"""Hostile and broken inputs to the real `tfpin infer`: model files that are not ONNX, graphs that
are not sound, tensors whose sizes lie, external data that tries to leave the model's folder,
operators and types the engine does not compute, and .npy inputs and --input/--output bindings
that do not fit the model.

Each must be refused with exit 2 (1 where the system refuses: a file that cannot be written) and a
message naming the problem, without a crash (signal, exit >= 128) or a hang, and without leaving an
output file behind. A positive control (Conv + Relu with external data inside the model's folder,
run from another directory) must run and match NumPy.

    TFPIN_EXE=build/cli/tfpin /usr/bin/python3 tests/onnx/test_onnx_hostile.py
"""
import os
import stat
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TFPIN = os.environ.get("TFPIN_EXE", "tfpin")
if os.sep in TFPIN:
    TFPIN = os.path.abspath(TFPIN)  # some cases run from another directory
TIMEOUT = 60  # seconds: a refusal is immediate; anything near this is a hang
OPSET = 13

RNG = np.random.default_rng(20240615)
X = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)


def conv_relu_reference(x, w, b):
    """Conv (pads 1, stride 1) + bias + Relu, N,C,H,W, in float64."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    padded = np.zeros((n, c, h + 2, wd + 2), np.float64)
    padded[:, :, 1:-1, 1:-1] = x
    y = np.zeros((n, o, h, wd), np.float64)
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", padded[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    y += b.reshape(1, o, 1, 1)
    return np.maximum(y, 0.0)


def raw_tensor(name, dims, raw=None, floats=None, elem=TensorProto.FLOAT):
    """A TensorProto with any dims and contents (onnx.helper.make_tensor checks their agreement)."""
    t = TensorProto()
    t.name, t.data_type = name, elem
    t.dims.extend(dims)
    if raw is not None:
        t.raw_data = raw
    if floats is not None:
        t.float_data.extend(floats)
    return t


def value_info(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def conv_relu_model(w_init=None, b_init=None, x_shape=(1, 3, 8, 8), y_shape=(1, 4, 8, 8),
                    x_elem=TensorProto.FLOAT, opset_imports=None, extra_initializers=()):
    """x -> Conv(w, b, pads 1) -> Relu -> y."""
    inits = [w_init if w_init is not None else numpy_helper.from_array(W, "w"),
             b_init if b_init is not None else numpy_helper.from_array(B, "b")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "conv_relu", [value_info("x", list(x_shape), x_elem)], [value_info("y", list(y_shape))],
        inits + list(extra_initializers))
    return helper.make_model(graph, opset_imports=opset_imports or [helper.make_opsetid("", OPSET)])


def relu_model(x_shape, y_shape=None, initializers=(), nodes=None, inputs=None, outputs=None,
               opset_imports=None):
    """x -> Relu -> y (or the nodes given)."""
    graph = helper.make_graph(
        nodes or [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        inputs or [value_info("x", list(x_shape))],
        outputs or [value_info("y", list(y_shape if y_shape is not None else x_shape))],
        list(initializers))
    return helper.make_model(graph, opset_imports=opset_imports or [helper.make_opsetid("", OPSET)])


def npy_header(descr, shape, fortran=False, version=1):
    """A .npy file's bytes up to the data, as numpy.lib.format writes them."""
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shape_text)
    prefix = 10 if version == 1 else 12
    header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    size = len(header).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode("latin-1")


# Exchanges FOLDER/w.bin with the link, then with the FIFO, for ever (renameat2 RENAME_EXCHANGE:
# the name always exists).
SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
folder = sys.argv[1].encode()
w = os.path.join(folder, b"w.bin")
while True:
    for other in (b"link.bin", b"fifo.bin"):
        for _ in range(2):
            libc.renameat2(-100, w, -100, os.path.join(folder, other), 2)
"""


class Hostile(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="tfpin-hostile-")
        self.tmp = Path(self._tmp.name)
        self.models = self.tmp / "models"
        self.models.mkdir()
        self.outdir = self.tmp / "out"  # only the outputs go here: it must stay empty
        self.outdir.mkdir()
        self.x = self.tmp / "x.npy"
        np.save(self.x, X)

    def tearDown(self):
        self._tmp.cleanup()

    # ---- helpers -------------------------------------------------------------------------------

    def save(self, model, name="m.onnx", folder=None):
        path = (folder or self.models) / name
        path.write_bytes(model.SerializeToString())
        return path

    def write(self, name, data):
        path = self.tmp / name
        path.write_bytes(data)
        return path

    def infer(self, model, inputs=None, outputs=None, extra=(), cwd=None):
        """Runs tfpin infer; checks that it neither crashed nor hung."""
        argv = [TFPIN, "infer", "--threads", "1"]
        if model is not None:
            argv += ["--model", str(model)]
        for i in ([str(self.x)] if inputs is None else inputs):
            argv += ["--input", str(i)]
        for o in ([str(self.outdir / "y.npy")] if outputs is None else outputs):
            argv += ["--output", str(o)]
        argv += list(extra)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                                  timeout=TIMEOUT, stdin=subprocess.DEVNULL, cwd=cwd)
        except subprocess.TimeoutExpired:
            self.fail(f"hung: no answer in {TIMEOUT} s: {argv}")
        self.assertGreaterEqual(proc.returncode, 0,
                                f"crashed: signal {-proc.returncode}\n{proc.stderr[-2000:]}")
        self.assertLess(proc.returncode, 128, f"crashed: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        self.assertNotIn("internal error", proc.stderr)
        self.assertNotIn("Sanitizer", proc.stderr)
        return proc

    def refused(self, model, fragments, code=2, **kwargs):
        """tfpin infer exits `code` with one stderr line holding every fragment, writing nothing.
        The line is printable ASCII: what comes from the model (names, ONNX's multi-line messages)
        and paths are escaped (\\n, \\xNN), so that a model cannot forge lines of a log."""
        proc = self.infer(model, **kwargs)
        self.assertEqual(proc.returncode, code, f"stdout: {proc.stdout[-1000:]}\nstderr: {proc.stderr[-2000:]}")
        missing = [f for f in fragments if f not in proc.stderr]
        self.assertFalse(missing, f"stderr lacks {missing}:\n{proc.stderr[-2000:]}")
        self.assertRegex(proc.stderr, r"^tfpin( infer)?: [ -~]*\n\Z", "not one printable line")
        self.assertEqual(sorted(os.listdir(self.outdir)), [], "an output file was left behind")
        self.assertEqual(proc.stdout, "", "a refusal prints no result")
        return proc

    def external_model(self, folder, location, offset=None, length=None, name="m.onnx"):
        """conv_relu_model with w in external data at `location` (written by the caller)."""
        w = numpy_helper.from_array(W, "w")
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        entries = {"location": location}
        if offset is not None:
            entries["offset"] = str(offset)
        if length is not None:
            entries["length"] = str(length)
        for key, value in entries.items():
            entry = w.external_data.add()
            entry.key, entry.value = key, value
        folder.mkdir(parents=True, exist_ok=True)
        return self.save(conv_relu_model(w_init=w), name, folder)

    # ---- the file is not an ONNX model ---------------------------------------------------------

    def test_truncated_model(self):
        whole = conv_relu_model().SerializeToString()
        cut = whole.index(W.tobytes()) + W.nbytes // 2  # inside the weights' raw data
        model = self.write("truncated.onnx", whole[:cut])
        self.refused(model, ["truncated.onnx", "not an ONNX model", "truncated"])

    def test_truncated_model_everywhere(self):
        # Every cut of a small model: refused or (a cut between fields) a valid smaller model that
        # is refused for what it lacks; never a crash or an output.
        whole = relu_model([1, 2]).SerializeToString()
        for cut in range(0, len(whole), max(1, len(whole) // 24)):
            with self.subTest(cut=cut):
                model = self.write("cut.onnx", whole[:cut])
                proc = self.infer(model)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("cut.onnx", proc.stderr)
                self.assertEqual(os.listdir(self.outdir), [])

    def test_wrong_magic(self):
        model = self.write("zip.onnx", b"PK\x03\x04" + bytes(range(256)) * 4)
        self.refused(model, ["zip.onnx", "not an ONNX model"])

    def test_random_bytes(self):
        for seed in range(8):
            with self.subTest(seed=seed):
                data = np.random.default_rng(seed).integers(0, 256, 4096, dtype=np.uint8).tobytes()
                model = self.write("random.onnx", data)
                proc = self.infer(model)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertRegex(proc.stderr, r"random\.onnx: (not an ONNX model|an ONNX model "
                                              r"without a graph|ONNX's checker refuses)")
                self.assertEqual(os.listdir(self.outdir), [])

    def test_empty_file(self):
        model = self.write("empty.onnx", b"")
        self.refused(model, ["empty.onnx", "an ONNX model without a graph"])

    def test_npy_as_model(self):
        self.refused(self.x, ["x.npy", "not an ONNX model"])

    def test_directory_as_model(self):
        self.refused(self.models, [str(self.models), "Is a directory"])

    def test_nonexistent_model(self):
        missing = self.tmp / "no-such.onnx"
        self.refused(missing, [str(missing), "No such file or directory"])

    # ---- the graph is not sound ----------------------------------------------------------------

    def test_cycle(self):
        # a = Relu(b), b = Relu(a): ONNX graphs are acyclic and topologically sorted.
        nodes = [helper.make_node("Add", ["x", "b_out"], ["a_out"], name="A"),
                 helper.make_node("Relu", ["a_out"], ["b_out"], name="B")]
        model = self.save(relu_model([1, 4], nodes=nodes,
                                     outputs=[value_info("b_out", [1, 4])]), "cycle.onnx")
        self.refused(model, ["cycle.onnx", "b_out", "topologically sorted"],
                     inputs=[self.npy("x2.npy", np.ones((1, 4), np.float32))])

    def test_missing_initializer(self):
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])], "g",
            [value_info("x", [1, 3, 8, 8])], [value_info("y", [1, 4, 8, 8])])
        model = self.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]))
        self.refused(model, ["m.onnx", "input 'w'", "conv", "is not output of any previous nodes"])

    def test_output_produced_by_no_node(self):
        model = self.save(relu_model([1, 4], outputs=[value_info("nothing", [1, 4])]))
        self.refused(model, ["m.onnx", "nothing"], inputs=[self.npy("x2.npy", np.ones((1, 4), np.float32))])

    # ---- tensors whose sizes lie ---------------------------------------------------------------

    def test_raw_data_shorter_than_dims(self):
        w = raw_tensor("w", W.shape, raw=W.tobytes()[:-4])
        model = self.save(conv_relu_model(w_init=w))
        self.refused(model, ["initializer 'w'", "raw data holds 428 bytes", "4x3x3x3", "432"])

    def test_float_data_fewer_than_dims(self):
        w = raw_tensor("w", W.shape, floats=W.ravel()[:-1].tolist())
        model = self.save(conv_relu_model(w_init=w))
        self.refused(model, ["initializer 'w'", "holds 107 values", "4x3x3x3", "108"])

    def test_huge_initializer_dims(self):
        for label, dims, data in [("no data", [2 ** 40, 2 ** 40], None),
                                  ("4 bytes", [2 ** 40, 2 ** 40], b"\0" * 4),
                                  ("wraps to 0", [2 ** 32, 2 ** 32], b"\0" * 4),
                                  ("2^63-1", [2 ** 63 - 1, 2], b"\0" * 4)]:
            with self.subTest(label):
                t = raw_tensor("huge", dims, raw=data)
                model = self.save(conv_relu_model(extra_initializers=[t]))
                self.refused(model, ["initializer 'huge'", "x".join(map(str, dims)),
                                     "more than 2^36 elements"])

    def test_huge_weights(self):
        w = raw_tensor("w", [2 ** 40, 2 ** 40, 3, 3])
        model = self.save(conv_relu_model(w_init=w))
        self.refused(model, ["initializer 'w'", "more than 2^36 elements"])

    def test_huge_input_dims(self):
        for dims in ([2 ** 31, 2 ** 31], [2 ** 40, 2 ** 40], [2 ** 32, 2 ** 32]):
            with self.subTest(dims=dims):
                model = self.save(relu_model(dims))
                self.refused(model, ["graph input 'x'", "x".join(map(str, dims)),
                                     "more than 2^36 elements"], inputs=[])

    def test_huge_intermediate_dims(self):
        # A small input, an output shape inference makes huge: Conv with a 2^31 stride? No: a
        # Pad of 2^31 on H and W (folded into the convolution).
        pads = helper.make_tensor("pads", TensorProto.INT64, [8], [0, 0, 2 ** 31, 2 ** 31, 0, 0, 2 ** 31, 2 ** 31])
        nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
                 helper.make_node("Conv", ["p", "w", "b"], ["y"], name="conv")]
        graph = helper.make_graph(nodes, "g", [value_info("x", [1, 3, 8, 8])],
                                  [value_info("y", [1, 4, None, None])],
                                  [pads, numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
        model = self.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]))
        self.refused(model, ["m.onnx", "more than 2^36 elements"])

    # ONNX 1.12's shape inference crashes on these by itself (python3 -c "onnx.shape_inference.
    # infer_shapes(m)" dies of SIGFPE or SIGSEGV, or loops for hours): the importer checks first.

    def conv_model(self, x_shape, w, attrs, pre_nodes=(), inits=()):
        nodes = list(pre_nodes) + [helper.make_node("Conv", ["c_in" if pre_nodes else "x", "w"], ["y"],
                                                    name="conv", **attrs)]
        graph = helper.make_graph(nodes, "g", [value_info("x", list(x_shape))],
                                  [value_info("y", [None] * 4)],
                                  [numpy_helper.from_array(w, "w")] + list(inits))
        return self.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]))

    def test_zero_stride(self):
        # SIGFPE: ONNX divides by the stride.
        w = np.ones((1, 1, 1, 1), np.float32)
        for name in ("strides", "dilations", "kernel_shape"):
            with self.subTest(name):
                model = self.conv_model([1, 1, 4, 4], w, {name: [0, 1]})
                self.refused(model, ["node 'conv' (Conv, opset 13)", f"{name} [0, 1] must be at least 1"],
                             inputs=[])

    def test_conv_weights_of_higher_rank_than_the_input(self):
        # SIGSEGV: ONNX takes the kernel's rank from the weights and reads the input's dims past
        # their end.
        model = self.conv_model([1, 1, 2], np.ones((1, 1, 1, 1, 1, 1, 1, 1), np.float32), {})
        self.refused(model, ["m.onnx", "op_type:Conv", "the weights have rank 8, the input 3"], inputs=[])

    def test_reshape_of_a_product_that_overflows(self):
        # SIGFPE: 2^31 x 2^32 elements wrap to INT64_MIN, the target shape's product to -1, and
        # ONNX computes INT64_MIN % -1.
        pads = numpy_helper.from_array(np.array([0, 0, 2 ** 31 - 1, 2 ** 32 - 1, 0, 0, 0, 0], np.int64), "pads")
        shape = numpy_helper.from_array(np.array([-1, 3, 5, 17, 257, 641, 65537, 6700417], np.int64), "shape")
        graph = helper.make_graph(
            [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"),
             helper.make_node("Reshape", ["p", "shape"], ["y"], name="reshape")], "g",
            [value_info("x", [1, 1, 1, 1])], [value_info("y", [None] * 8)], [pads, shape])
        model = self.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]))
        self.refused(model, ["m.onnx", "op_type:Reshape", "1x1x2147483648x4294967296",
                             "more than 2^36 elements"], inputs=[])

    def test_same_padding_over_a_huge_dimension_does_not_hang(self):
        # ONNX's auto_pad SAME inference subtracts the stride from the dimension until it fits: a
        # Pad of 2^40 in front took hours, a 2^36 input 16 s.
        w = np.ones((1, 1, 1, 1), np.float32)
        pads = numpy_helper.from_array(np.array([0, 0, 2 ** 40, 0, 0, 0, 0, 0], np.int64), "pads")
        cases = [
            ("pad 2^40", [1, 1, 4, 4], [helper.make_node("Pad", ["x", "pads"], ["c_in"], name="pad")],
             [pads], ["op_type:Conv", "1x1x1099511627780x4", "more than 2^36 elements"]),
            ("input 2^36", [1, 1, 2 ** 36, 1], [], [],
             ["op_type:Conv", "auto_pad SAME_UPPER over dimension 2 of 68719476736 with stride 2",
              "more than the 2^26 strides"]),
        ]
        for label, x_shape, pre, inits, fragments in cases:
            with self.subTest(label):
                model = self.conv_model(x_shape, w, {"auto_pad": "SAME_UPPER", "strides": [2, 1]}, pre, inits)
                start = time.monotonic()
                self.refused(model, ["m.onnx"] + fragments, inputs=[])
                self.assertLess(time.monotonic() - start, 10)

    def test_auto_pad_that_is_not_an_onnx_value(self):
        # ONNX's inference takes any auto_pad but VALID through its stride-counting loop: an empty
        # (zero-channel) input padded by 2^40 passes the element bound and looped for minutes.
        w = np.ones((1, 1, 1, 1), np.float32)
        pads = numpy_helper.from_array(np.array([0, 0, 2 ** 40, 0, 0, 0, 0, 0], np.int64), "pads")
        pad = [helper.make_node("Pad", ["x", "pads"], ["c_in"], name="pad")]
        for value in ("SA]E_UPPER", "same_upper", ""):
            with self.subTest(value):
                model = self.conv_model([1, 0, 4, 4], w, {"auto_pad": value, "strides": [2, 1]}, pad, [pads])
                start = time.monotonic()
                self.refused(model, ["node 'conv' (Conv, opset 13)", f"auto_pad '{value}' is not one of "
                                     "NOTSET, SAME_UPPER, SAME_LOWER, VALID"], inputs=[])
                self.assertLess(time.monotonic() - start, 10)
        # NOTSET without pads takes the same loop: refused by the 2^26 bound, not by its value.
        model = self.conv_model([1, 0, 4, 4], w, {"auto_pad": "NOTSET", "strides": [2, 1]}, pad, [pads])
        start = time.monotonic()
        self.refused(model, ["m.onnx", "op_type:Conv", "auto_pad NOTSET over dimension 2 of 1099511627780",
                             "more than the 2^26 strides"], inputs=[])
        self.assertLess(time.monotonic() - start, 10)

    def test_negative_initializer_dims(self):
        t = raw_tensor("neg", [-1, -4], floats=[1.0, 2.0, 3.0, 4.0])  # -1 x -4 = 4 values
        model = self.save(conv_relu_model(extra_initializers=[t]))
        self.refused(model, ["initializer 'neg'", "dimension -1 is negative"])

    def test_negative_input_dims(self):
        model = self.save(relu_model([1, -5]))
        self.refused(model, ["graph input 'x'", "dimension -5 is negative"], inputs=[])
        self.refused(model, ["graph input 'x'", "fixed dimension 1 of -5", "5 was given"],
                     inputs=[self.npy("x2.npy", np.ones((1, 5), np.float32))])

    # ---- external data -------------------------------------------------------------------------

    def test_external_data_absolute(self):
        outside = self.tmp / "secret.bin"
        outside.write_bytes(W.tobytes())
        model = self.external_model(self.tmp / "m", str(outside))
        self.refused(model, ["initializer 'w'", str(outside), "is absolute"])

    def test_external_data_dot_dot(self):
        (self.tmp / "secret.bin").write_bytes(W.tobytes())
        for location in ("../secret.bin", "sub/../../secret.bin", "./.."):
            with self.subTest(location):
                model = self.external_model(self.tmp / "m" / "", location)
                (self.tmp / "m" / "sub").mkdir(exist_ok=True)
                self.refused(model, ["initializer 'w'", location, "leaves the model's folder"])

    def test_external_data_symlink_outside(self):
        outside = self.tmp / "secret.bin"
        outside.write_bytes(W.tobytes())
        folder = self.tmp / "m"
        folder.mkdir()
        (folder / "w.bin").symlink_to(outside)
        model = self.external_model(folder, "w.bin")
        self.refused(model, ["initializer 'w'", "w.bin", str(outside),
                             "links are followed only when relative and inside the model's folder"])
        (folder / "w.bin").unlink()
        (folder / "w.bin").symlink_to("../secret.bin")
        self.refused(model, ["initializer 'w'", "w.bin", "leads outside the model's folder through a link"])

    def test_external_data_symlinked_folder_outside(self):
        outside = self.tmp / "elsewhere"
        outside.mkdir()
        (outside / "w.bin").write_bytes(W.tobytes())
        folder = self.tmp / "m"
        folder.mkdir()
        (folder / "data").symlink_to(outside)
        model = self.external_model(folder, "data/w.bin")
        self.refused(model, ["initializer 'w'", "data/w.bin", "relative and inside the model's folder"])

    def test_external_data_relative_link_inside_the_folder_runs(self):
        folder = self.tmp / "m"
        (folder / "store").mkdir(parents=True)
        (folder / "store" / "weights.bin").write_bytes(W.tobytes())
        (folder / "data").mkdir()
        (folder / "data" / "w.bin").symlink_to("../store/weights.bin")
        proc = self.infer(self.external_model(folder, "data/w.bin"))
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_external_data_hidden_names_are_not_read(self):
        # A model in a home folder must not read ~/.ssh/id_rsa (here: bytes of the right size).
        folder = self.tmp / "home"
        (folder / ".ssh").mkdir(parents=True)
        (folder / ".ssh" / "id_rsa").write_bytes(W.tobytes())
        (folder / ".w.bin").write_bytes(W.tobytes())
        for location in (".ssh/id_rsa", ".w.bin", "./.w.bin"):
            with self.subTest(location):
                self.refused(self.external_model(folder, location),
                             ["initializer 'w'", location, "hidden file or folder"])
        (folder / "w.bin").symlink_to(".ssh/id_rsa")
        self.refused(self.external_model(folder, "w.bin"), ["w.bin", "('.ssh')", "hidden"])

    def test_external_data_location_with_a_nul_byte(self):
        folder = self.tmp / "m"
        folder.mkdir()
        (folder / "w.bin").write_bytes(W.tobytes())
        self.refused(self.external_model(folder, "w.bin\0../../etc/passwd"),
                     ["initializer 'w'", "w.bin\\x00../../etc/passwd", "holds a NUL byte"])

    def test_external_data_swapped_while_loading(self):
        """Another process exchanges the data file with a link to an outside file, then with a
        FIFO, over and over, while the model loads: every run reads the inside bytes or refuses,
        none reads the outside file, none hangs (60 runs)."""
        folder = self.tmp / "m"
        folder.mkdir()
        inside = W.tobytes()
        outside = self.tmp / "secret.bin"
        outside.write_bytes((W + 100).tobytes())
        (folder / "real.bin").write_bytes(inside)
        (folder / "link.bin").symlink_to(outside)
        os.mkfifo(folder / "fifo.bin")
        (folder / "w.bin").write_bytes(inside)
        model = self.external_model(folder, "w.bin")
        out = self.outdir / "y.npy"
        self.assertEqual(self.infer(model, outputs=[out]).returncode, 0)
        expected = np.load(out)  # from the inside bytes, before any swap
        out.unlink()
        swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(folder)])
        try:
            outside_results = 0
            for _ in range(60):
                proc = self.infer(model, outputs=[out])
                if proc.returncode == 0:
                    outside_results += int(not np.array_equal(np.load(out), expected))
                    out.unlink()
                else:
                    self.assertEqual(proc.returncode, 2, proc.stderr)
        finally:
            swapper.kill()
            swapper.wait()
        self.assertEqual(outside_results, 0, "runs that read the file outside the model's folder")

    def test_external_data_missing_file(self):
        model = self.external_model(self.tmp / "m", "nowhere.bin")
        self.refused(model, ["initializer 'w'", "nowhere.bin"])

    def test_external_data_directory(self):
        folder = self.tmp / "m"
        (folder / "w.bin").mkdir(parents=True)
        model = self.external_model(folder, "w.bin")
        self.refused(model, ["initializer 'w'", "w.bin", "not a regular file"])

    def test_external_data_beyond_the_file(self):
        folder = self.tmp / "m"
        folder.mkdir()
        (folder / "w.bin").write_bytes(W.tobytes())
        for label, offset, length, fragments in [
                ("offset past the end", W.nbytes + 8, W.nbytes, ["beyond the end", "w.bin"]),
                ("length past the end", 4, W.nbytes, ["beyond the end", "w.bin"]),
                ("offset 2^64-1", 2 ** 64 - 1, W.nbytes, ["beyond the end", "w.bin"]),
                ("length 2^64-1", 0, 2 ** 64 - 1, ["holds 18446744073709551615 bytes", "432"]),
                ("length short", 0, W.nbytes - 4, ["holds 428 bytes", "432"]),
                ("offset past the end, no length", W.nbytes + 8, None, ["holds 0 bytes", "432"]),
                ("offset not a number", "12abc", None, ["offset='12abc'", "not a byte count"]),
                ("offset negative", "-4", None, ["offset='-4'", "not a byte count"]),
                ("offset 2^64", str(2 ** 64), None, ["offset='18446744073709551616'", "not a byte count"])]:
            with self.subTest(label):
                model = self.external_model(folder, "w.bin", offset, length)
                self.refused(model, ["initializer 'w'"] + fragments)

    # ---- types and operators the engine does not compute ---------------------------------------

    def test_float64_weights(self):
        w = numpy_helper.from_array(W.astype(np.float64), "w")
        model = self.save(conv_relu_model(w_init=w))
        self.refused(model, ["initializer 'w'", "DOUBLE", "float32"])

    def test_int32_weights(self):
        w = numpy_helper.from_array(W.astype(np.int32), "w")
        model = self.save(conv_relu_model(w_init=w))
        self.refused(model, ["initializer 'w'", "INT32", "float32"])

    def test_int64_weights(self):
        w = numpy_helper.from_array(W.astype(np.int64), "w")
        model = self.save(conv_relu_model(w_init=w))
        self.refused(model, ["node 'conv' (Conv, opset 13)", "weights 'w' is int64, not float32"])

    def test_float64_input(self):
        model = self.save(conv_relu_model(x_elem=TensorProto.DOUBLE))
        self.refused(model, ["graph input 'x'", "DOUBLE", "float32"])

    def test_unsupported_operator(self):
        nodes = [helper.make_node("Gelu", ["x"], ["y"], name="gelu")]
        model = self.save(relu_model([1, 4], nodes=nodes))
        proc = self.refused(model, ["node 'gelu' (Gelu, opset 13)", "operator Gelu is not supported",
                                    "supported: ", "Conv", "Relu"], inputs=[])
        self.assertIn("Add, AveragePool, BatchNormalization", proc.stderr)

    def test_unsupported_operator_among_supported(self):
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                 helper.make_node("Erf", ["r"], ["y"], name="erf")]
        model = self.save(relu_model([1, 4], nodes=nodes))
        self.refused(model, ["node 'erf' (Erf, opset 13)", "operator Erf is not supported"], inputs=[])

    def test_names_from_the_model_are_escaped(self):
        # A node name with a newline and a terminal escape: shown escaped, on the one line.
        nodes = [helper.make_node("Gelu", ["x"], ["y"], name="evil\ntfpin: forged \x1b[31mred")]
        model = self.save(relu_model([1, 4], nodes=nodes))
        self.refused(model, ["node 'evil\\ntfpin: forged \\x1b[31mred' (Gelu, opset 13)"], inputs=[])

    def test_custom_domain(self):
        nodes = [helper.make_node("Relu", ["x"], ["y"], name="custom", domain="com.example")]
        model = self.save(relu_model([1, 4], nodes=nodes,
                                     opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid("com.example", 1)]))
        self.refused(model, ["node 'custom'", "domain 'com.example' is not supported", "Relu"],
                     inputs=[])

    def test_no_default_opset(self):
        model = self.save(relu_model([1, 4], opset_imports=[helper.make_opsetid("com.example", 1)]))
        self.refused(model, ["m.onnx", "imports no opset of the default (ai.onnx) domain"], inputs=[])

    def test_no_opset_at_all(self):
        model = relu_model([1, 4])
        del model.opset_import[:]
        self.refused(self.save(model), ["m.onnx", "imports no opset of the default (ai.onnx) domain"],
                     inputs=[])

    # ---- dimensions that are not known or do not agree -----------------------------------------

    def test_dynamic_non_batch_dimension(self):
        model = self.save(relu_model(["N", 3, "H", "W"], ["N", 3, "H", "W"]))
        self.refused(model, ["graph input 'x'", "dynamic dimension 0 ('N')", "give the batch size"],
                     inputs=[])
        model = self.save(relu_model([1, 3, "H", 8], [1, 3, "H", 8]))
        self.refused(model, ["graph input 'x'", "dynamic dimension 2 ('H')",
                             "only the batch dimension may be dynamic"], inputs=[])

    def test_batch_contradicts_fixed_dimension(self):
        x2 = self.npy("x2.npy", np.ones((2, 3, 8, 8), np.float32))
        self.refused(self.save(conv_relu_model()),
                     ["graph input 'x'", "1x3x8x8", "fixed dimension 0 of 1", "2 was given"],
                     inputs=[x2])

    # ---- --input arrays ------------------------------------------------------------------------

    def npy(self, name, array, **kwargs):
        path = self.tmp / name
        np.save(path, array, **kwargs)
        return path

    def test_input_wrong_shape(self):
        model = self.save(conv_relu_model())
        x = self.npy("x-5.npy", np.ones((1, 3, 5, 5), np.float32))
        self.refused(model, ["graph input 'x'", "fixed dimension 2 of 8", "5 was given"], inputs=[x])
        x = self.npy("x-rank3.npy", np.ones((3, 8, 8), np.float32))
        self.refused(model, ["graph input 'x'", "has rank 4", "the given array is 3x8x8"], inputs=[x])

    def test_input_float64(self):
        x = self.npy("x64.npy", X.astype(np.float64))
        self.refused(self.save(conv_relu_model()), ["x64.npy", "dtype '<f8' (float64)", "float32"],
                     inputs=[x])

    def test_input_int32(self):
        x = self.npy("x32.npy", X.astype(np.int32))
        self.refused(self.save(conv_relu_model()), ["x32.npy", "dtype '<i4' (int32)", "float32"],
                     inputs=[x])

    def test_input_int64_for_float_input(self):
        x = self.npy("xi64.npy", X.astype(np.int64))
        self.refused(self.save(conv_relu_model()),
                     ["graph input 'x' is FLOAT", "the given array is integer"], inputs=[x])

    def test_input_big_endian(self):
        x = self.npy("xbe.npy", X.astype(">f4"))
        self.refused(self.save(conv_relu_model()), ["xbe.npy", "dtype '>f4'", "float32"], inputs=[x])

    def test_input_fortran_order(self):
        x = self.npy("xf.npy", np.asfortranarray(X))
        self.refused(self.save(conv_relu_model()), ["xf.npy", "Fortran order"], inputs=[x])

    def test_input_object_array(self):
        x = self.npy("xo.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
        self.refused(self.save(conv_relu_model()), ["xo.npy", "dtype '|O'", "float32"], inputs=[x])

    def test_input_truncated_data(self):
        whole = self.x.read_bytes()
        x = self.write("xt.npy", whole[:-4])
        self.refused(self.save(conv_relu_model()), ["xt.npy", "(truncated)"], inputs=[x])

    def test_input_extra_data(self):
        x = self.write("xx.npy", self.x.read_bytes() + b"\0" * 4)
        self.refused(self.save(conv_relu_model()), ["xx.npy", "holds 772 data bytes", "needs 768"],
                     inputs=[x])

    def test_input_far_larger_than_its_shape_is_not_read_whole(self):
        # Read the header, then the declared data and a little more: never the whole input.
        model = self.save(conv_relu_model())
        self.refused(model, ["/dev/zero", "not a NumPy .npy file"], inputs=["/dev/zero"])
        big = self.write("xbig.npy", self.x.read_bytes())
        with open(big, "r+b") as f:
            f.truncate(8 << 30)  # sparse: 8 GiB that the old reader read into memory
        self.refused(model, ["xbig.npy", "holds more than 66304 data bytes", "needs 768"],
                     inputs=[big])

    def test_input_truncated_header(self):
        whole = self.x.read_bytes()
        model = self.save(conv_relu_model())
        for cut, fragment in [(0, "not a NumPy .npy file"), (5, "not a NumPy .npy file"),
                              (9, "not a NumPy .npy file"), (12, "truncated"), (60, "truncated")]:
            with self.subTest(cut=cut):
                x = self.write("xh.npy", whole[:cut])
                self.refused(model, ["xh.npy", fragment], inputs=[x])

    def test_input_garbage_header(self):
        model = self.save(conv_relu_model())
        cases = [
            ("no magic", b"NUMPY\x01\x00" + b"x" * 100, "no \\x93NUMPY magic"),
            ("version 9", b"\x93NUMPY\x09\x00\x10\x00" + b" " * 16, ".npy format version 9"),
            ("not a dict", npy_header("<f4", (1,)).replace(b"{", b"[", 1) + b"\0" * 4, "malformed header"),
            ("unknown key", npy_header("<f4", (1,)).replace(b"'shape'", b"'shapf'") + b"\0" * 4,
             "unknown header key 'shapf'"),
            ("no shape", b"\x93NUMPY\x01\x00\x30\x00" + b"{'descr': '<f4', 'fortran_order': False}".ljust(47) + b"\n",
             "lacks descr, fortran_order or shape"),
            ("negative dim", npy_header("<f4", (-1, 3)), "negative dimension -1"),
            ("huge dims", npy_header("<f4", (2 ** 31, 2 ** 31)), "more than 2^34 elements"),
            ("dim past int64", npy_header("<f4", (2 ** 64, 1)), "malformed header"),
            ("header length past the end", b"\x93NUMPY\x01\x00\xff\xff" + b"{}", "truncated: the header says 65535"),
            ("version 2 length past the end", b"\x93NUMPY\x02\x00\xff\xff\xff\xff" + b"{}",
             "truncated: the header says 4294967295"),
            ("unterminated string", b"\x93NUMPY\x01\x00\x10\x00{'descr: '<f4   ", "malformed header"),
            ("nul bytes", b"\x93NUMPY\x01\x00\x10\x00" + b"\0" * 16, "malformed header"),
        ]
        for label, data, fragment in cases:
            with self.subTest(label):
                x = self.write("xg.npy", data)
                self.refused(model, ["xg.npy", fragment], inputs=[x])

    def test_input_missing_file(self):
        missing = self.tmp / "no-such.npy"
        self.refused(self.save(conv_relu_model()), [str(missing), "cannot open", "No such file"],
                     inputs=[missing])

    def test_input_directory(self):
        self.refused(self.save(conv_relu_model()), [str(self.models), "a directory, not a .npy file"],
                     inputs=[self.models])

    def test_input_names_a_missing_input(self):
        self.refused(self.save(conv_relu_model()), ["the model has no input 'nope'"],
                     inputs=[f"nope={self.x}"])

    def test_input_given_twice(self):
        self.refused(self.save(conv_relu_model()), ["input 'x' is given twice"],
                     inputs=[f"x={self.x}", f"x={self.x}"])

    def test_too_many_inputs(self):
        self.refused(self.save(conv_relu_model()),
                     ["2 arrays given", "the model has only 1 inputs"], inputs=[self.x, self.x])

    def test_input_not_given(self):
        self.refused(self.save(conv_relu_model()), ["--input", "'x'", "is not given"], inputs=[])

    def test_input_empty_value(self):
        self.refused(self.save(conv_relu_model()), ["--input ''", "FILE.npy or NAME=FILE.npy"],
                     inputs=[""])

    # ---- --output bindings ---------------------------------------------------------------------

    def test_output_names_a_missing_output(self):
        self.refused(self.save(conv_relu_model()),
                     ["--output nope=", "the model has no output 'nope'", "its outputs: y"],
                     outputs=[f"nope={self.outdir / 'y.npy'}"])

    def test_too_many_outputs(self):
        self.refused(self.save(conv_relu_model()), ["--output", "2 files given", "1 outputs"],
                     outputs=[self.outdir / "a.npy", self.outdir / "b.npy"])

    def test_output_in_missing_directory(self):
        target = self.tmp / "no-such-dir" / "y.npy"
        proc = self.refused(self.save(conv_relu_model()), [str(target), "cannot write"], code=1,
                            outputs=[target])
        self.assertFalse(target.parent.exists())
        del proc

    def test_second_output_in_missing_directory(self):
        # Two outputs, the second unwritable: the first must not be left behind either.
        nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"),
                 helper.make_node("Sigmoid", ["x"], ["z"], name="sigmoid")]
        model = self.save(relu_model([1, 4], nodes=nodes,
                                     outputs=[value_info("y", [1, 4]), value_info("z", [1, 4])]))
        target = self.tmp / "no-such-dir" / "z.npy"
        self.refused(model, [str(target), "cannot write"], code=1,
                     inputs=[self.npy("x2.npy", np.ones((1, 4), np.float32))],
                     outputs=[self.outdir / "y.npy", target])

    # ---- outputs that fail to write: nothing that was there is removed or truncated -----------

    def two_output_model(self):
        nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"),
                 helper.make_node("Sigmoid", ["x"], ["z"], name="sigmoid")]
        return self.save(relu_model([1, 4], nodes=nodes,
                                    outputs=[value_info("y", [1, 4]), value_info("z", [1, 4])]))

    def full_device(self, name):
        """A node of /dev/full (every write: ENOSPC) in the output folder; needs root."""
        if os.geteuid() != 0:
            self.skipTest("mknod needs root")
        path = self.outdir / name
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        return path

    def assert_only(self, files):
        """The output folder holds exactly `files` (name -> bytes): no temporary file is left."""
        self.assertEqual(sorted(os.listdir(self.outdir)), sorted(files))
        for name, data in files.items():
            if data is not None:
                self.assertEqual((self.outdir / name).read_bytes(), data, name)

    def test_failing_device_output_is_not_removed(self):
        full = self.full_device("full")
        proc = self.infer(self.save(conv_relu_model()), outputs=[full])
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("cannot write", proc.stderr)
        self.assertTrue(stat.S_ISCHR(os.lstat(full).st_mode), "the device node was removed")
        self.assertTrue(stat.S_ISCHR(os.stat(self.outdir / "full").st_mode))

    def test_file_too_large_keeps_the_file_that_was_there(self):
        keep = self.outdir / "keep.npy"
        keep.write_bytes(b"precious\n")
        argv = [TFPIN, "infer", "--threads", "1", "--model", str(self.save(conv_relu_model())),
                "--input", str(self.x), "--output", str(keep)]
        # No file may grow past 0 bytes; SIGXFSZ ignored, so that write() fails with EFBIG.
        proc = subprocess.run(["bash", "-c", "trap '' XFSZ; ulimit -f 0; exec \"$@\"", "bash", *argv],
                              capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("cannot write", proc.stderr)
        self.assert_only({"keep.npy": b"precious\n"})

    def test_second_output_failing_leaves_the_first_as_it_was(self):
        a = self.outdir / "a.npy"
        a.write_bytes(b"old a\n")
        full = self.full_device("full")
        proc = self.infer(self.two_output_model(),
                          inputs=[self.npy("x2.npy", np.ones((1, 4), np.float32))],
                          outputs=[f"y={a}", f"z={full}"])
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("cannot write", proc.stderr)
        self.assert_only({"a.npy": b"old a\n", "full": None})
        self.assertTrue(stat.S_ISCHR(os.lstat(full).st_mode))

    def test_output_replaces_a_file_keeping_its_mode_and_a_link_keeps_pointing_at_it(self):
        target = self.outdir / "y.npy"
        target.write_bytes(b"old\n")
        os.chmod(target, 0o640)
        link = self.outdir / "link.npy"
        link.symlink_to("y.npy")
        proc = self.infer(self.save(conv_relu_model()), outputs=[link])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(link.is_symlink(), "the link was replaced by a file")
        self.assertEqual(np.load(target).shape, (1, 4, 8, 8))
        self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o640)
        self.assertEqual(sorted(os.listdir(self.outdir)), ["link.npy", "y.npy"])

    def test_output_to_dev_stdout_writes_into_the_redirected_file(self):
        # A shell's `> log`: the array goes into the log at its offset, the log is not replaced.
        log = self.tmp / "job.log"
        argv = " ".join([TFPIN, "infer", "--threads", "1", "--model", str(self.save(conv_relu_model())),
                         "--input", str(self.x), "--output", "/dev/stdout"])
        log.write_bytes(b"")
        inode = os.stat(log).st_ino
        proc = subprocess.run(["bash", "-c", f"echo before; {argv}; echo after"],
                              stdout=open(log, "wb"), stderr=subprocess.PIPE, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        data = log.read_bytes()
        self.assertEqual(os.stat(log).st_ino, inode, "the log was replaced")
        self.assertTrue(data.startswith(b"before\n\x93NUMPY"), data[:40])
        self.assertTrue(data.endswith(b"after\n"), data[-40:])

    def test_output_keeps_another_owner_and_hard_links(self):
        if os.geteuid() != 0:
            self.skipTest("chown needs root")
        theirs = self.outdir / "theirs.npy"
        theirs.write_bytes(b"old\n")
        os.chown(theirs, 65534, 65534)
        linked = self.outdir / "linked.npy"
        linked.write_bytes(b"old\n")
        os.link(linked, self.outdir / "other-name.npy")
        for target in (theirs, linked):
            with self.subTest(target=target.name):
                proc = self.infer(self.save(conv_relu_model()), outputs=[target])
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(np.load(target).shape, (1, 4, 8, 8))
        self.assertEqual(os.stat(theirs).st_uid, 65534)
        self.assertEqual((self.outdir / "other-name.npy").read_bytes(), linked.read_bytes())
        self.assertEqual(sorted(os.listdir(self.outdir)), ["linked.npy", "other-name.npy", "theirs.npy"])

    def test_output_through_a_dangling_link_creates_its_target(self):
        link = self.outdir / "link.npy"
        link.symlink_to("made.npy")
        proc = self.infer(self.save(conv_relu_model()), outputs=[link])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(link.is_symlink())
        self.assertEqual(np.load(self.outdir / "made.npy").shape, (1, 4, 8, 8))

    # ---- the positive control ------------------------------------------------------------------

    def test_external_data_inside_the_folder_runs(self):
        folder = self.tmp / "model dir"
        folder.mkdir()
        # w in its own file at an offset, b in a subfolder: both inside the model's folder.
        (folder / "weights.bin").write_bytes(b"\0" * 16 + W.tobytes())
        (folder / "data").mkdir()
        (folder / "data" / "b.bin").write_bytes(B.tobytes())
        w = numpy_helper.from_array(W, "w")
        b = numpy_helper.from_array(B, "b")
        for tensor, location, offset in ((w, "weights.bin", 16), (b, "data/b.bin", None)):
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            entries = [("location", location)] + ([("offset", str(offset)), ("length", str(W.nbytes))]
                                                  if offset is not None else [])
            for key, value in entries:
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
        model = self.save(conv_relu_model(w_init=w, b_init=b), "m.onnx", folder)
        onnx.checker.check_model(str(model))
        expected = conv_relu_reference(X.astype(np.float64), W.astype(np.float64), B.astype(np.float64))
        elsewhere = self.tmp / "elsewhere"
        elsewhere.mkdir()
        # From another directory (external data is relative to the model, not to the current
        # directory), then from the model's folder with a relative path.
        for cwd, model_arg in ((elsewhere, str(model)), (folder, "m.onnx")):
            with self.subTest(cwd=cwd.name):
                out = self.outdir / "y.npy"
                proc = self.infer(model_arg, inputs=[self.x], outputs=[out], cwd=cwd)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn("y: 1x4x8x8", proc.stdout)
                y = np.load(out)
                self.assertEqual(y.dtype, np.float32)
                self.assertEqual(y.shape, (1, 4, 8, 8))
                np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
                out.unlink()

    def test_constant_with_external_data_runs(self):
        # Conv weights from a Constant node whose tensor is external: relative to the model too.
        folder = self.tmp / "const"
        folder.mkdir()
        (folder / "w.bin").write_bytes(W.tobytes())
        w = numpy_helper.from_array(W, "w_value")
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        entry = w.external_data.add()
        entry.key, entry.value = "location", "w.bin"
        nodes = [helper.make_node("Constant", [], ["w"], name="weights", value=w),
                 helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["y"], name="relu")]
        graph = helper.make_graph(nodes, "g", [value_info("x", [1, 3, 8, 8])],
                                  [value_info("y", [1, 4, 8, 8])], [numpy_helper.from_array(B, "b")])
        model = self.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]),
                          "m.onnx", folder)
        elsewhere = self.tmp / "elsewhere"
        elsewhere.mkdir()
        # A decoy in the current directory: it must not be read instead.
        (elsewhere / "w.bin").write_bytes(np.zeros_like(W).tobytes())
        out = self.outdir / "y.npy"
        proc = self.infer(model, outputs=[out], cwd=elsewhere)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        expected = conv_relu_reference(X.astype(np.float64), W.astype(np.float64), B.astype(np.float64))
        np.testing.assert_allclose(np.load(out), expected, rtol=1e-4, atol=1e-5)

    def test_plain_model_runs(self):
        out = self.outdir / "y.npy"
        proc = self.infer(self.save(conv_relu_model()), outputs=[f"y={out}"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        expected = conv_relu_reference(X.astype(np.float64), W.astype(np.float64), B.astype(np.float64))
        np.testing.assert_allclose(np.load(out), expected, rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    # Where oneDNN cannot run on this CPU the engine refuses: skip, with the reason.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from onednn_usable import exit_if_onednn_unusable  # noqa: E402
    exit_if_onednn_unusable(TFPIN)
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
