"""Generated programs for the placement-picture tests (test_graph.py).

chain(k): k delegates in a row, each `t_i = add(t_{i-1}, c)` tagged d_i on
cuda:(i // 2 % 2), with a host `relu_(t_i)` after each: every delegate after
the first reads a storage a host call wrote. Where two neighbours share a
device the write forced a fresh H2D copy of a storage that was valid there;
where they do not, the copy to the other device was needed anyway.
"""


def device(i):
    return "cuda:%d" % (i // 2 % 2)


def forced_copies(k):
    """Delegates whose H2D copy a host write forced."""
    return sum(1 for i in range(1, k) if device(i) == device(i - 1))


def chain(k, sizes=(4, 4)):
    dims = " ".join("sizes: %d" % s for s in sizes)
    spec = "tensor { dtype: F32 %s }" % dims
    nodes = [
        'nodes { name: "a" input { kind: USER_INPUT } %s }' % spec,
        'nodes { name: "c" input { kind: USER_INPUT } %s }' % spec,
    ]
    previous = "a"
    for i in range(k):
        nodes.append(
            'nodes { name: "t%d" call { op: "aten::add.Tensor" args { value: "%s" } '
            'args { value: "c" } } %s delegation_tag: "d%d" }' % (i, previous, spec, i))
        nodes.append(
            'nodes { name: "r%d" call { op: "aten::relu_" args { value: "t%d" } } %s }'
            % (i, i, spec))
        previous = "t%d" % i
    nodes.append('nodes { name: "output" output { values { value: "%s" } } }' % previous)
    targets = "\n".join('    tag_targets { key: "d%d" value: "%s" }' % (i, device(i))
                        for i in range(k))
    return ("program {\n  methods {\n    name: \"forward\"\n    "
            + "\n    ".join(nodes)
            + "\n  }\n}\noptions {\n  partitioner {\n" + targets + "\n  }\n}\n")
