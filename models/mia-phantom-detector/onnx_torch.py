"""Run this model's ONNX file with torch, for evaluating an exported model (e.g. the previous
version, whose checkpoint is not kept) without onnxruntime in Python. NOT FOR CLINICAL USE.

It interprets only the operators train.py's export emits (Conv, Relu, Add, Resize nearest x2,
Sigmoid, Exp, Mul, Constant) and refuses anything else, so a silently different graph cannot
pass for this one.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def load(path: str) -> Any:
    import onnx
    import torch
    from onnx import numpy_helper

    graph = onnx.load(path).graph
    init = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in graph.initializer}
    nodes = list(graph.node)
    supported = {'Conv', 'Relu', 'Add', 'Resize', 'Sigmoid', 'Exp', 'Mul', 'Constant'}
    unknown = {n.op_type for n in nodes} - supported
    if unknown:
        raise ValueError(f'{path}: unsupported ONNX operators {sorted(unknown)}')
    outputs = [o.name for o in graph.output]
    input_name = graph.input[0].name

    def attrs(node: Any) -> dict[str, Any]:
        return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}

    def run(x: Any) -> tuple[Any, ...]:
        env: dict[str, Any] = dict(init)
        env[input_name] = x
        for n in nodes:
            a = attrs(n)
            ins = [env[i] if i else None for i in n.input]
            if n.op_type == 'Conv':
                pads = a.get('pads', [0, 0, 0, 0])
                if pads[0] != pads[2] or pads[1] != pads[3]:
                    raise ValueError('asymmetric Conv padding')
                y = torch.nn.functional.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                                               stride=tuple(a.get('strides', [1, 1])), padding=(pads[0], pads[1]),
                                               dilation=tuple(a.get('dilations', [1, 1])), groups=a.get('group', 1))
            elif n.op_type == 'Relu':
                y = torch.relu(ins[0])
            elif n.op_type == 'Add':
                y = ins[0] + ins[1]
            elif n.op_type == 'Mul':
                y = ins[0] * ins[1]
            elif n.op_type == 'Sigmoid':
                y = torch.sigmoid(ins[0])
            elif n.op_type == 'Exp':
                y = torch.exp(ins[0])
            elif n.op_type == 'Constant':
                y = torch.from_numpy(numpy_helper.to_array(a['value']).copy())
            else:  # Resize
                scales = ins[2].tolist() if len(ins) > 2 and ins[2] is not None else None
                if a.get('mode', b'nearest') != b'nearest' or scales is None or scales[:2] != [1.0, 1.0] \
                        or scales[2] != scales[3] or scales[2] != float(int(scales[2])):
                    raise ValueError('only integer nearest Resize is supported')
                y = torch.nn.functional.interpolate(ins[0], scale_factor=scales[2], mode='nearest')
            env[n.output[0]] = y
        return tuple(env[o] for o in outputs)

    return run


def predictor(path: str) -> Any:
    """x (n, 128, 128) float32 -> (heatmap, size, offset) numpy, as train.predict_series returns."""
    import torch
    run = load(path)

    def predict(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        heats, sizes, offs = [], [], []
        with torch.no_grad():
            t = torch.from_numpy(x.astype(np.float32))[:, None]
            for i in range(0, t.shape[0], 32):
                h, s, o = run(t[i:i + 32])
                heats.append(h.numpy())
                sizes.append(s.numpy())
                offs.append(o.numpy())
        return np.concatenate(heats), np.concatenate(sizes), np.concatenate(offs)

    return predict
