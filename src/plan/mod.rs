//! Kernel choice as data, with no Vulkan calls: what the device is ([`DeviceClass`], built
//! once per context from what the device reports), the row of tuning values for its class
//! ([`DeviceTuning`]: thresholds, tiles and workgroup shapes, each row saying what device
//! it was fitted on), and the caller's fixed choices ([`Overrides`]). The rules that decide
//! a call (`vk::gemv_plan`, `vk::coop_shapes`) read these three and nothing else of the device.
//! Adding a device is adding a row; a device without one can tune its SIMT GEMV shape itself
//! ([`tuned`]).

pub mod blocks_gemv;
pub mod device_class;
pub mod fragment_shape;
mod nearest;
pub mod overrides;
pub mod tuned;
pub mod tuned_gemm;
pub mod tuning;

pub use device_class::{DeviceClass, Family};
pub use fragment_shape::FragmentShape;
pub use overrides::{CoopGemmTuning, Overrides};
pub use tuning::{BytesGemv, DeviceTuning, GemmTile, GEMM_TILE};
