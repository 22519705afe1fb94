//! The seeds/000 linear classifier's state on a wgpu device
//! ([`LinearTrainer`]): its buffers, the two WGSL passes (`linear.wgsl`) and
//! the queue operations a step is made of. A leaf: the step parts
//! (`steps`) and the experiments (`linear`, `loader`) drive it.

use super::{WgpuCtx, WgpuError};

/// Largest number of classes the shader's per-row scratch holds.
pub const MAX_CLASSES: u32 = 64;

/// Model state on the device plus the host copy of the data set.
pub struct LinearTrainer<'a> {
    ctx: &'a WgpuCtx,
    features: u32,
    classes: u32,
    max_batch: u32,
    lr: f32,
    params: wgpu::Buffer,
    x: wgpu::Buffer,
    y: wgpu::Buffer,
    w: wgpu::Buffer,
    /// Held with the bind group that uses it.
    _dlogits: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    forward: wgpu::ComputePipeline,
    update: wgpu::ComputePipeline,
}

/// Deterministic uniform floats in [-1, 1) (initial weights only).
fn uniform(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = stallscope_loader::Rng::new(seed);
    (0..n).map(|_| rng.unit_f64() as f32 * 2.0 - 1.0).collect()
}

/// Initial weights: uniform in ±1/√features (PyTorch's Linear default range), biases included.
pub fn initial_weights(features: u32, classes: u32, seed: u64) -> Vec<f32> {
    let bound = 1.0 / (features as f32).sqrt();
    uniform(seed, (features as usize + 1) * classes as usize)
        .into_iter()
        .map(|v| v * bound)
        .collect()
}

impl<'a> LinearTrainer<'a> {
    pub fn new(
        ctx: &'a WgpuCtx,
        features: u32,
        classes: u32,
        max_batch: u32,
        lr: f32,
    ) -> Result<Self, WgpuError> {
        let x_bytes = check_shape(ctx, features, classes, max_batch)?;
        let d = &ctx.device;
        let b = Buffers::new(d, features, classes, max_batch, x_bytes);
        let layout = bind_group_layout(d);
        let (forward, update) = pipelines(d, &layout);
        let bind_group = b.bind_group(d, &layout);
        Ok(LinearTrainer {
            ctx,
            features,
            classes,
            max_batch,
            lr,
            params: b.params,
            x: b.x,
            y: b.y,
            w: b.w,
            _dlogits: b.dlogits,
            bind_group,
            forward,
            update,
        })
    }

    /// Reset the weights (the same initial weights for every configuration).
    pub fn set_weights(&self, weights: &[f32]) {
        self.ctx
            .queue
            .write_buffer(&self.w, 0, bytemuck_f32(weights));
    }

    /// The step's parameters: `batch` rows of the resident buffers (queued;
    /// they land at the next submit).
    pub fn set_rows(&self, batch: u32) {
        debug_assert!(batch <= self.max_batch);
        let mut p = [0u8; 16];
        p[0..4].copy_from_slice(&batch.to_le_bytes());
        p[4..8].copy_from_slice(&self.features.to_le_bytes());
        p[8..12].copy_from_slice(&self.classes.to_le_bytes());
        p[12..16].copy_from_slice(&self.lr.to_le_bytes());
        self.ctx.queue.write_buffer(&self.params, 0, &p);
    }

    /// The host→device copy of one batch (queued; it lands at the next submit).
    pub fn write_batch(&self, x: &[f32], y: &[u32]) {
        self.set_rows(y.len() as u32);
        let q = &self.ctx.queue;
        q.write_buffer(&self.x, 0, bytemuck_f32(x));
        q.write_buffer(&self.y, 0, bytemuck_u32(y));
    }

    /// Block until the queue's work has finished.
    pub fn wait(&self) -> Result<(), WgpuError> {
        self.ctx.wait()
    }

    /// Submit pending copies on their own (the diagnostic transfer stage).
    pub fn flush_copies(&self) {
        self.ctx.queue.submit(std::iter::empty());
    }

    /// Submit one training step (forward + update passes) for a batch of `batch` rows.
    pub fn submit_step(&self, batch: u32) {
        let mut enc = self
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("step"),
            });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("forward"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.forward);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(batch.div_ceil(64), 1, 1);
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("update"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.update);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(((self.features + 1) * self.classes).div_ceil(64), 1, 1);
        }
        self.ctx.queue.submit([enc.finish()]);
    }

    /// Read the weights back (tests only: it synchronizes).
    pub fn read_weights(&self) -> Result<Vec<f32>, WgpuError> {
        let size = self.w.size();
        let staging = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read w"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&self.w, 0, &staging, 0, size);
        self.ctx.queue.submit([enc.finish()]);
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.ctx.wait()?;
        rx.recv()
            .map_err(|e| WgpuError::Map(e.to_string()))?
            .map_err(|e| WgpuError::Map(e.to_string()))?;
        let data = slice
            .get_mapped_range()
            .map_err(|e| WgpuError::Map(e.to_string()))?;
        let out = data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        drop(data);
        staging.unmap();
        Ok(out)
    }
}

fn bytemuck_f32(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding or invalid bit patterns; the byte view covers exactly the slice.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn bytemuck_u32(v: &[u32]) -> &[u8] {
    // SAFETY: as above, for u32.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// The byte size of the largest batch's inputs, once the model's shape is
/// one the shader and the device can hold.
fn check_shape(
    ctx: &WgpuCtx,
    features: u32,
    classes: u32,
    max_batch: u32,
) -> Result<u64, WgpuError> {
    if classes == 0 || classes > MAX_CLASSES {
        return Err(WgpuError::Invalid(format!(
            "the wgpu linear model takes 1..={MAX_CLASSES} classes, not {classes}"
        )));
    }
    let x_bytes = u64::from(max_batch) * u64::from(features) * 4;
    if x_bytes > ctx.max_binding() {
        return Err(WgpuError::Invalid(format!(
            "a batch of {max_batch} × {features} floats ({x_bytes} bytes) exceeds the device's largest storage binding ({} bytes)",
            ctx.max_binding()
        )));
    }
    Ok(x_bytes)
}

/// The model's buffers: the step's parameters, a batch's inputs and labels,
/// the weights, and the logits' gradient.
struct Buffers {
    params: wgpu::Buffer,
    x: wgpu::Buffer,
    y: wgpu::Buffer,
    w: wgpu::Buffer,
    dlogits: wgpu::Buffer,
}

impl Buffers {
    fn new(d: &wgpu::Device, features: u32, classes: u32, max_batch: u32, x_bytes: u64) -> Self {
        let storage = |label: &str, size: u64, extra: wgpu::BufferUsages| {
            d.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(4),
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | extra,
                mapped_at_creation: false,
            })
        };
        let params = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Buffers {
            params,
            x: storage("x", x_bytes, wgpu::BufferUsages::empty()),
            y: storage("y", u64::from(max_batch) * 4, wgpu::BufferUsages::empty()),
            w: storage(
                "w",
                (u64::from(features) + 1) * u64::from(classes) * 4,
                wgpu::BufferUsages::COPY_SRC,
            ),
            dlogits: storage(
                "dlogits",
                u64::from(max_batch) * u64::from(classes) * 4,
                wgpu::BufferUsages::empty(),
            ),
        }
    }

    /// The buffers bound in the shader's order (`linear.wgsl`).
    fn bind_group(&self, d: &wgpu::Device, layout: &wgpu::BindGroupLayout) -> wgpu::BindGroup {
        let buffers = [&self.params, &self.x, &self.y, &self.w, &self.dlogits];
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .zip(0u32..)
            .map(|(b, binding)| wgpu::BindGroupEntry {
                binding,
                resource: b.as_entire_binding(),
            })
            .collect();
        d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("linear"),
            layout,
            entries: &entries,
        })
    }
}

/// One explicit layout for both passes (`update` does not read the
/// labels, so derived layouts would differ).
fn bind_group_layout(d: &wgpu::Device) -> wgpu::BindGroupLayout {
    let entry = |binding: u32, ty: wgpu::BufferBindingType| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let read_only = wgpu::BufferBindingType::Storage { read_only: true };
    let read_write = wgpu::BufferBindingType::Storage { read_only: false };
    d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("linear"),
        entries: &[
            entry(0, wgpu::BufferBindingType::Uniform),
            entry(1, read_only),
            entry(2, read_only),
            entry(3, read_write),
            entry(4, read_write),
        ],
    })
}

/// The shader's two passes, `forward` and `update`, on `layout`.
fn pipelines(
    d: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
) -> (wgpu::ComputePipeline, wgpu::ComputePipeline) {
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("linear.wgsl"),
        source: wgpu::ShaderSource::Wgsl(include_str!("linear.wgsl").into()),
    });
    let pipeline_layout = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("linear"),
        bind_group_layouts: &[Some(layout)],
        immediate_size: 0,
    });
    let pipeline = |entry: &str| {
        d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        })
    };
    (pipeline("forward"), pipeline("update"))
}
