// One SGD training step of the seeds/000 linear classifier (logits = x·W + b,
// softmax cross-entropy) in two passes: `forward` writes the gradient of the
// loss with respect to the logits, `update` reduces it into W and b and
// applies the step. No value is read back to the host.

struct Params {
    batch: u32,
    features: u32,
    classes: u32,
    lr: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
// batch × features, row-major.
@group(0) @binding(1) var<storage, read> x: array<f32>;
// batch class indices.
@group(0) @binding(2) var<storage, read> y: array<u32>;
// features × classes weights, then `classes` biases.
@group(0) @binding(3) var<storage, read_write> w: array<f32>;
// batch × classes: d(mean loss)/d(logit).
@group(0) @binding(4) var<storage, read_write> dlogits: array<f32>;

const MAX_CLASSES: u32 = 64u;

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.x;
    if (row >= params.batch) {
        return;
    }
    let d_in = params.features;
    let k_out = min(params.classes, MAX_CLASSES);
    var e: array<f32, 64>;
    var m = -3.0e38;
    for (var k = 0u; k < k_out; k++) {
        var acc = w[d_in * k_out + k];
        for (var d = 0u; d < d_in; d++) {
            acc += x[row * d_in + d] * w[d * k_out + k];
        }
        e[k] = acc;
        m = max(m, acc);
    }
    var sum = 0.0;
    for (var k = 0u; k < k_out; k++) {
        e[k] = exp(e[k] - m);
        sum += e[k];
    }
    let label = y[row];
    let inv_batch = 1.0 / f32(params.batch);
    for (var k = 0u; k < k_out; k++) {
        var g = e[k] / sum;
        if (k == label) {
            g -= 1.0;
        }
        dlogits[row * k_out + k] = g * inv_batch;
    }
}

@compute @workgroup_size(64)
fn update(@builtin(global_invocation_id) gid: vec3<u32>) {
    let d_in = params.features;
    let k_out = params.classes;
    let i = gid.x;
    if (i >= (d_in + 1u) * k_out) {
        return;
    }
    let d = i / k_out;
    let k = i % k_out;
    var g = 0.0;
    for (var r = 0u; r < params.batch; r++) {
        var xv = 1.0;
        if (d < d_in) {
            xv = x[r * d_in + d];
        }
        g += xv * dlogits[r * k_out + k];
    }
    w[i] = w[i] - params.lr * g;
}
