//! Compiler statistics of q4vk's pipelines through `VK_KHR_pipeline_executable_properties`
//! (registers, shared memory, spills: whatever the driver reports), for tuning
//! (`q4vk-bench --stats`). Enabled only on devices q4vk creates, and only when asked
//! (`ContextConfig::pipeline_statistics`): capturing statistics can slow pipeline creation.

use super::device::Device;
use crate::error::{Error, Result};
use ash::vk;

/// One executable of a pipeline: its name and its statistics as `name = value` lines.
pub struct Executable {
    /// The driver's name for the executable (e.g. the shader stage's binary).
    pub name: String,
    /// `name = value` per statistic, in the driver's order.
    pub statistics: Vec<String>,
}

/// The statistics of every executable of `pipeline` (created with
/// `VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR` on a device with the extension enabled).
pub fn of_pipeline(device: &Device, pipeline: vk::Pipeline) -> Result<Vec<Executable>> {
    let ext = device.statistics.as_ref().ok_or_else(|| {
        Error::Unsupported(
            "pipeline statistics were not enabled on this device (ContextConfig::pipeline_statistics, own devices offering VK_KHR_pipeline_executable_properties)".into(),
        )
    })?;
    let info = vk::PipelineInfoKHR::default().pipeline(pipeline);
    // SAFETY: a pipeline of this device; the extension and its feature are enabled.
    let executables = unsafe { ext.get_pipeline_executable_properties(&info) }
        .map_err(|e| Error::vk("vkGetPipelineExecutablePropertiesKHR", e))?;
    executables
        .iter()
        .enumerate()
        .map(|(i, props)| {
            let which = vk::PipelineExecutableInfoKHR::default()
                .pipeline(pipeline)
                .executable_index(i as u32);
            // SAFETY: as above; `i` is below the count the driver returned.
            let stats = unsafe { ext.get_pipeline_executable_statistics(&which) }
                .map_err(|e| Error::vk("vkGetPipelineExecutableStatisticsKHR", e))?;
            Ok(Executable {
                name: text(props.name_as_c_str()),
                statistics: stats.iter().map(statistic).collect(),
            })
        })
        .collect()
}

/// A driver's fixed-size name as text (lossy; empty if it lacks its NUL).
fn text(name: std::result::Result<&std::ffi::CStr, std::ffi::FromBytesUntilNulError>) -> String {
    name.map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn statistic(s: &vk::PipelineExecutableStatisticKHR) -> String {
    // SAFETY: the driver sets the union member `format` names.
    let value = unsafe {
        match s.format {
            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
            vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
            vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => s.value.f64.to_string(),
            _ => "?".into(),
        }
    };
    format!("{} = {value}", text(s.name_as_c_str()))
}
