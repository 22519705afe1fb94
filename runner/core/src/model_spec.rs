//! The models and optimizers as plain data: what a suite names and a bundle
//! records (name, input shape, classes, parameter count), with no tensor
//! library. The libtorch back end builds them (`stallscope_torch::Trainer`);
//! the wgpu back end and the peers' harness build the same architectures.

/// Which model, with the shape of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelSpec {
    /// seeds/003: Conv 1→16, ReLU, MaxPool, Conv 16→32, ReLU, MaxPool,
    /// Linear 1568→64, ReLU, Linear 64→10 on 1×28×28 (105,866 parameters).
    FashionCnn,
    /// seeds/000: one Linear layer `features → classes`.
    Linear { features: i64, classes: i64 },
    /// A larger CNN for `3 × size × size` images: four stride-2 3×3
    /// convolutions (32, 64, 128, 256 channels), global average pooling,
    /// Linear 256→classes.
    ImageCnn { size: i64, classes: i64 },
}

/// The optimizer and its learning rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptimizerSpec {
    Adam { lr: f64 },
    Sgd { lr: f64 },
}

impl ModelSpec {
    /// Name recorded in the bundle's settings.
    pub fn name(&self) -> &'static str {
        match self {
            ModelSpec::FashionCnn => "fashion_cnn",
            ModelSpec::Linear { .. } => "linear",
            ModelSpec::ImageCnn { .. } => "image_cnn",
        }
    }

    /// Shape of one input sample.
    pub fn input_shape(&self) -> Vec<i64> {
        match *self {
            ModelSpec::FashionCnn => vec![1, 28, 28],
            ModelSpec::Linear { features, .. } => vec![features],
            ModelSpec::ImageCnn { size, .. } => vec![3, size, size],
        }
    }

    /// Trainable parameters, from the architecture (the tests hold it equal
    /// to libtorch's count of the built model).
    pub fn parameters(&self) -> u64 {
        fn conv(cin: i64, cout: i64) -> i64 {
            cin * cout * 9 + cout
        }
        fn linear(fin: i64, fout: i64) -> i64 {
            fin * fout + fout
        }
        let n = match *self {
            ModelSpec::FashionCnn => conv(1, 16) + conv(16, 32) + linear(1568, 64) + linear(64, 10),
            ModelSpec::Linear { features, classes } => linear(features, classes),
            ModelSpec::ImageCnn { classes, .. } => {
                conv(3, 32) + conv(32, 64) + conv(64, 128) + conv(128, 256) + linear(256, classes)
            }
        };
        n as u64
    }

    /// Number of classes of the output.
    pub fn classes(&self) -> i64 {
        match *self {
            ModelSpec::FashionCnn => 10,
            ModelSpec::Linear { classes, .. } | ModelSpec::ImageCnn { classes, .. } => classes,
        }
    }

    /// The optimizer the seeds use with this model: Adam 1e-3 for the CNNs,
    /// SGD 0.01 for the linear classifier.
    pub fn default_optimizer(&self) -> OptimizerSpec {
        match self {
            ModelSpec::Linear { .. } => OptimizerSpec::Sgd { lr: 0.01 },
            _ => OptimizerSpec::Adam { lr: 1e-3 },
        }
    }
}

impl OptimizerSpec {
    pub fn name(&self) -> &'static str {
        match self {
            OptimizerSpec::Adam { .. } => "adam",
            OptimizerSpec::Sgd { .. } => "sgd",
        }
    }
    pub fn lr(&self) -> f64 {
        match *self {
            OptimizerSpec::Adam { lr } | OptimizerSpec::Sgd { lr } => lr,
        }
    }
}
