"""The XID catalog, as data: code -> mnemonic, meaning, severity, recommended action, state.

Built from NVIDIA's published XID catalog (the "Xid Errors" table of the GPU deployment and
management documentation) for current data-centre GPUs. Recommended actions use NVIDIA's
resolution buckets, so runbooks and alert routes can key on them. The resulting state is what
the GPU's health becomes (``ok`` for errors that belong to one application and leave the GPU
usable). An unknown code is still reported, with what is known: its number, an error
severity and a "check the driver's catalog" action.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.model.snapshot import HealthState


@dataclass(frozen=True)
class XidInfo:
    code: int
    name: str  # mnemonic, e.g. GPU_FALLEN_OFF_BUS
    meaning: str
    severity: Severity
    action: str  # NVIDIA's resolution bucket, e.g. RESET_GPU
    state: HealthState


ACTIONS: Mapping[str, str] = MappingProxyType({
    "IGNORE": "no action needed; informational",
    "RESTART_APP": "restart the application; the GPU is usable",
    "RESET_GPU": "drain the GPU and reset it (nvidia-smi -r) or reboot the node",
    "RESTART_BM": "drain the node and reboot it (power-cycle if the GPU does not return)",
    "WORKFLOW_XID_48": "drain and reset the GPU; replace it if double-bit errors recur",
    "WORKFLOW_NVLINK_ERR": "check the NVLink/NVSwitch fabric; reset the GPU if errors persist",
    "CHECK_MECHANICALS": "check power cabling, seating and cooling of the GPU",
    "UPDATE_SW": "update the driver / firmware",
    "CONTACT_SUPPORT": "collect nvidia-bug-report and contact NVIDIA support",
    "CHECK_CATALOG": "unknown code: look it up in the driver's XID catalog",
})

# NVML's eventData for an XID it could not identify (nvml.h nvmlEventData_t: "eventData is set
# as 999 for unknown Xid error"); the kernel log names the same fault with its real code.
UNKNOWN_XID = 999

_I, _W, _E, _F = Severity.INFO, Severity.WARN, Severity.ERROR, Severity.FATAL
_OK, _DEG, _FAIL = HealthState.OK, HealthState.DEGRADED, HealthState.FAILED

_ROWS: tuple[tuple[int, str, str, Severity, str, HealthState], ...] = (
    (1, "INVALID_PUSHBUFFER", "Invalid or corrupted push buffer stream", _W, "RESTART_APP", _OK),
    (2, "INVALID_PUSHBUFFER_2", "Invalid or corrupted push buffer stream", _W, "RESTART_APP",
     _OK),
    (3, "INVALID_PUSHBUFFER_3", "Invalid or corrupted push buffer stream", _W, "RESTART_APP",
     _OK),
    (6, "INVALID_PUSHBUFFER_STREAM", "Invalid or corrupted push buffer stream", _W,
     "RESTART_APP", _OK),
    (7, "INVALID_PUSHBUFFER_ADDRESS", "Invalid or corrupted push buffer address", _W,
     "RESTART_APP", _OK),
    (8, "GPU_STOPPED_PROCESSING", "GPU stopped processing", _E, "RESET_GPU", _DEG),
    (9, "DRIVER_ERROR_PROGRAMMING_GPU", "Driver error programming GPU", _E, "RESET_GPU", _DEG),
    (11, "INVALID_PUSHBUFFER_STREAM_11", "Invalid or corrupted push buffer stream", _W,
     "RESTART_APP", _OK),
    (12, "DRIVER_ERROR_HANDLING_EXCEPTION", "Driver error handling GPU exception", _E,
     "RESET_GPU", _DEG),
    (13, "GRAPHICS_ENGINE_EXCEPTION", "Graphics engine exception (often an application "
     "out-of-range access or illegal instruction)", _W, "RESTART_APP", _OK),
    (16, "DISPLAY_ENGINE_HUNG", "Display engine hung", _W, "RESET_GPU", _DEG),
    (18, "BUS_MASTERING_DISABLED", "Bus mastering disabled in PCI config space", _E,
     "RESTART_BM", _FAIL),
    (19, "DISPLAY_ENGINE_ERROR", "Display engine error", _W, "IGNORE", _OK),
    (24, "GPU_SEMAPHORE_TIMEOUT", "GPU semaphore timeout", _W, "RESTART_APP", _OK),
    (25, "INVALID_PUSHBUFFER_STREAM_25", "Invalid or illegal push buffer stream", _W,
     "RESTART_APP", _OK),
    (26, "FRAMEBUFFER_TIMEOUT", "Framebuffer timeout", _E, "RESET_GPU", _DEG),
    (27, "VIDEO_PROCESSOR_EXCEPTION", "Video processor exception", _W, "RESTART_APP", _OK),
    (28, "VIDEO_PROCESSOR_EXCEPTION_28", "Video processor exception", _W, "RESTART_APP", _OK),
    (29, "VIDEO_PROCESSOR_EXCEPTION_29", "Video processor exception", _W, "RESTART_APP", _OK),
    (30, "GPU_SEMAPHORE_ACCESS_ERROR", "GPU semaphore access error", _W, "RESTART_APP", _OK),
    (31, "MMU_FAULT", "GPU memory page fault (MMU fault), usually an application "
     "illegal address", _W, "RESTART_APP", _OK),
    (32, "PUSHBUFFER_STREAM_CORRUPTED", "Invalid or corrupted push buffer stream "
     "(PCIe/driver corruption)", _E, "RESET_GPU", _DEG),
    (33, "MICROCONTROLLER_ERROR", "Internal micro-controller error", _E, "RESET_GPU", _DEG),
    (34, "VIDEO_PROCESSOR_EXCEPTION_34", "Video processor exception", _W, "RESTART_APP", _OK),
    (35, "VIDEO_PROCESSOR_EXCEPTION_35", "Video processor exception", _W, "RESTART_APP", _OK),
    (36, "VIDEO_PROCESSOR_EXCEPTION_36", "Video processor exception", _W, "RESTART_APP", _OK),
    (37, "DRIVER_FIRMWARE_ERROR_37", "Driver firmware error", _E, "RESET_GPU", _DEG),
    (38, "DRIVER_FIRMWARE_ERROR", "Driver firmware error", _E, "RESET_GPU", _DEG),
    (42, "VIDEO_PROCESSOR_EXCEPTION_42", "Video processor exception", _W, "RESTART_APP", _OK),
    (43, "GPU_STOPPED_PROCESSING_CHANNEL", "GPU stopped processing a channel (the "
     "application's context was reset)", _W, "RESTART_APP", _OK),
    (44, "GRAPHICS_ENGINE_CONTEXT_SWITCH_FAULT", "Graphics engine fault during context "
     "switch", _E, "RESET_GPU", _DEG),
    (45, "PREEMPTIVE_CLEANUP", "Preemptive cleanup, due to previous errors (the channel "
     "was torn down)", _I, "IGNORE", _OK),
    (46, "GPU_STOPPED_PROCESSING_46", "GPU stopped processing", _E, "RESET_GPU", _DEG),
    (47, "VIDEO_PROCESSOR_EXCEPTION_47", "Video processor exception", _W, "RESTART_APP", _OK),
    (48, "DBE_ECC_ERROR", "Double-bit ECC error (uncorrectable memory error)", _E,
     "WORKFLOW_XID_48", _DEG),
    (54, "AUX_POWER_NOT_CONNECTED", "Auxiliary power is not connected to the GPU", _E,
     "CHECK_MECHANICALS", _FAIL),
    (56, "DISPLAY_ENGINE_ERROR_56", "Display engine error", _W, "IGNORE", _OK),
    (57, "VIDEO_MEMORY_PROGRAMMING_ERROR", "Error programming video memory interface", _E,
     "RESET_GPU", _DEG),
    (58, "UNSTABLE_VIDEO_MEMORY_INTERFACE", "Unstable video memory interface detected", _E,
     "RESET_GPU", _DEG),
    (59, "MICROCONTROLLER_ERROR_59", "Internal micro-controller error", _E, "RESET_GPU",
     _DEG),
    (60, "VIDEO_PROCESSOR_EXCEPTION_60", "Video processor exception", _W, "RESTART_APP", _OK),
    (61, "MICROCONTROLLER_BREAKPOINT", "Internal micro-controller breakpoint/warning", _E,
     "RESET_GPU", _DEG),
    (62, "MICROCONTROLLER_HALT", "Internal micro-controller halt", _F, "RESET_GPU", _FAIL),
    (63, "ECC_PAGE_RETIREMENT_OR_ROW_REMAP", "ECC page retirement or row remapping "
     "recording event (applied at the next GPU reset)", _W, "RESET_GPU", _DEG),
    (64, "ECC_PAGE_RETIREMENT_OR_ROW_REMAP_FAILURE", "ECC page retirement or row remapper "
     "recording failure", _E, "RESET_GPU", _DEG),
    (65, "VIDEO_PROCESSOR_EXCEPTION_65", "Video processor exception", _W, "RESTART_APP", _OK),
    (66, "ILLEGAL_ACCESS_BY_DRIVER", "Illegal access by driver", _E, "UPDATE_SW", _DEG),
    (67, "ILLEGAL_ACCESS_BY_DRIVER_67", "Illegal access by driver", _E, "UPDATE_SW", _DEG),
    (68, "NVDEC0_EXCEPTION", "NVDEC0 exception (video decoder)", _W, "RESTART_APP", _OK),
    (69, "GRAPHICS_ENGINE_CLASS_ERROR", "Graphics engine class error", _W, "RESTART_APP",
     _OK),
    (70, "CE3_ERROR", "Copy engine 3 error", _W, "RESTART_APP", _OK),
    (71, "CE4_ERROR", "Copy engine 4 error", _W, "RESTART_APP", _OK),
    (72, "CE5_ERROR", "Copy engine 5 error", _W, "RESTART_APP", _OK),
    (73, "NVENC2_ERROR", "NVENC2 error (video encoder)", _W, "RESTART_APP", _OK),
    (74, "NVLINK_ERROR", "NVLink error", _E, "WORKFLOW_NVLINK_ERR", _DEG),
    (75, "CE6_ERROR", "Copy engine 6 error", _W, "RESTART_APP", _OK),
    (76, "CE7_ERROR", "Copy engine 7 error", _W, "RESTART_APP", _OK),
    (77, "CE8_ERROR", "Copy engine 8 error", _W, "RESTART_APP", _OK),
    (78, "VGPU_START_FAILED", "vGPU start failed", _E, "RESET_GPU", _DEG),
    (79, "GPU_FALLEN_OFF_BUS", "GPU has fallen off the bus", _F, "RESTART_BM", _FAIL),
    (80, "CORRUPTED_DATA_SENT_TO_GPU", "Corrupted data sent to GPU", _E, "RESET_GPU", _DEG),
    (81, "VGA_SUBSYSTEM_ERROR", "VGA subsystem error", _E, "RESET_GPU", _DEG),
    (82, "NVJPG0_ERROR", "NVJPG0 error (JPEG engine)", _W, "RESTART_APP", _OK),
    (83, "NVDEC1_ERROR", "NVDEC1 error", _W, "RESTART_APP", _OK),
    (84, "NVDEC2_ERROR", "NVDEC2 error", _W, "RESTART_APP", _OK),
    (85, "CE9_ERROR", "Copy engine 9 error", _W, "RESTART_APP", _OK),
    (86, "OFA_EXCEPTION", "OFA (optical flow accelerator) exception", _W, "RESTART_APP", _OK),
    (88, "NVDEC3_ERROR", "NVDEC3 error", _W, "RESTART_APP", _OK),
    (89, "NVDEC4_ERROR", "NVDEC4 error", _W, "RESTART_APP", _OK),
    (92, "HIGH_SBE_ECC_RATE", "High single-bit ECC error rate", _W, "CONTACT_SUPPORT", _DEG),
    (93, "INFOROM_WEAR_LIMIT", "Non-fatal violation of provisioned InfoROM wear limit", _W,
     "CONTACT_SUPPORT", _OK),
    (94, "CONTAINED_ECC_ERROR", "Contained ECC error (only the affected applications were "
     "stopped)", _E, "RESTART_APP", _DEG),
    (95, "UNCONTAINED_ECC_ERROR", "Uncontained ECC error (all applications on the GPU are "
     "affected)", _F, "RESET_GPU", _FAIL),
    (96, "NVDEC5_ERROR", "NVDEC5 error", _W, "RESTART_APP", _OK),
    (97, "NVDEC6_ERROR", "NVDEC6 error", _W, "RESTART_APP", _OK),
    (98, "NVDEC7_ERROR", "NVDEC7 error", _W, "RESTART_APP", _OK),
    (99, "NVJPG1_ERROR", "NVJPG1 error", _W, "RESTART_APP", _OK),
    (100, "NVJPG2_ERROR", "NVJPG2 error", _W, "RESTART_APP", _OK),
    (101, "NVJPG3_ERROR", "NVJPG3 error", _W, "RESTART_APP", _OK),
    (102, "NVJPG4_ERROR", "NVJPG4 error", _W, "RESTART_APP", _OK),
    (103, "NVJPG5_ERROR", "NVJPG5 error", _W, "RESTART_APP", _OK),
    (104, "NVJPG6_ERROR", "NVJPG6 error", _W, "RESTART_APP", _OK),
    (105, "NVJPG7_ERROR", "NVJPG7 error", _W, "RESTART_APP", _OK),
    (106, "SMBPBI_TEST_MESSAGE", "SMBPBI test message", _I, "IGNORE", _OK),
    (107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI test message (silent)", _I, "IGNORE", _OK),
    (109, "CONTEXT_SWITCH_TIMEOUT", "Context switch timeout error", _W, "RESTART_APP", _OK),
    (110, "SECURITY_FAULT", "Security fault error", _F, "RESET_GPU", _FAIL),
    (111, "DISPLAY_BUNDLE_ERROR", "Display bundle error event", _W, "IGNORE", _OK),
    (112, "DISPLAY_SUPERVISOR_ERROR", "Display supervisor error", _W, "IGNORE", _OK),
    (113, "DP_LINK_TRAINING_ERROR", "DisplayPort link training error", _W, "IGNORE", _OK),
    (114, "DISPLAY_PIPELINE_UNDERFLOW", "Display pipeline underflow", _W, "IGNORE", _OK),
    (115, "DISPLAY_CORE_CHANNEL_ERROR", "Display core channel error", _W, "IGNORE", _OK),
    (116, "DISPLAY_WINDOW_CHANNEL_ERROR", "Display window channel error", _W, "IGNORE", _OK),
    (117, "DISPLAY_CURSOR_CHANNEL_ERROR", "Display cursor channel error", _W, "IGNORE", _OK),
    (118, "DISPLAY_PIXEL_PIPELINE_ERROR", "Display pixel pipeline error", _W, "IGNORE", _OK),
    (119, "GSP_RPC_TIMEOUT", "GSP RPC timeout (the GPU system processor stopped "
     "answering)", _F, "RESET_GPU", _FAIL),
    (120, "GSP_ERROR", "GSP error (GPU system processor)", _F, "RESET_GPU", _FAIL),
    (121, "C2C_LINK_CORRECTED_ERROR", "C2C (chip-to-chip) link corrected error", _W,
     "IGNORE", _OK),
    (122, "SPI_PMU_RPC_READ_FAILURE", "SPI PMU RPC read failure", _E, "RESET_GPU", _DEG),
    (123, "SPI_PMU_RPC_WRITE_FAILURE", "SPI PMU RPC write failure", _E, "RESET_GPU", _DEG),
    (124, "SPI_PMU_RPC_ERASE_FAILURE", "SPI PMU RPC erase failure", _E, "RESET_GPU", _DEG),
    (125, "INFOROM_FS_FAILURE", "InfoROM file system failure", _E, "CONTACT_SUPPORT", _DEG),
    (137, "NVLINK_FLA_PRIV_ERROR", "NVLink FLA privilege error", _E, "RESTART_APP", _OK),
    (140, "UNRECOVERED_ECC_ERROR", "Unrecovered ECC error (the GPU must be reset)", _F,
     "RESET_GPU", _FAIL),
    (143, "GPU_INIT_FAILURE", "GPU initialization failure", _F, "RESET_GPU", _FAIL),
    (144, "NVLINK_SAW_ERROR", "NVLink SAW error", _E, "WORKFLOW_NVLINK_ERR", _DEG),
    (145, "NVLINK_RLW_ERROR", "NVLink RLW error", _E, "WORKFLOW_NVLINK_ERR", _DEG),
    (146, "NVLINK_TLW_ERROR", "NVLink TLW error", _E, "WORKFLOW_NVLINK_ERR", _DEG),
    (147, "NVLINK_TREX_ERROR", "NVLink TREX error", _E, "WORKFLOW_NVLINK_ERR", _DEG),
    (148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW control error", _E, "WORKFLOW_NVLINK_ERR",
     _DEG),
    (149, "NVLINK_NETIR_ERROR", "NVLink NETIR error", _E, "WORKFLOW_NVLINK_ERR", _DEG),
    (150, "NVLINK_MSE_ERROR", "NVLink MSE error", _E, "WORKFLOW_NVLINK_ERR", _DEG),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "GPU recovery action changed (the driver asks "
     "for a reset or a reboot)", _E, "RESET_GPU", _DEG),
    (155, "NVLINK_SW_DEFINED_ERROR", "NVLink software-defined error", _E,
     "WORKFLOW_NVLINK_ERR", _DEG),
    (156, "RESOURCE_RETIREMENT_EVENT", "Resource retirement event", _W, "RESET_GPU", _DEG),
    (157, "RESOURCE_RETIREMENT_FAILURE", "Resource retirement failure", _E,
     "CONTACT_SUPPORT", _DEG),
    # Not a driver XID: NVML's code for an XID it could not identify (nvml.h, nvmlEventData_t:
    # "eventData is set as 999 for unknown Xid error"). The kernel log's NVRM line names it.
    (UNKNOWN_XID, "UNKNOWN_XID",
     "An XID NVML could not identify; the kernel log's NVRM: Xid line names it", _E,
     "CHECK_CATALOG", _OK),
)

CATALOG: Mapping[int, XidInfo] = MappingProxyType({
    code: XidInfo(code, name, meaning, severity, action, state)
    for code, name, meaning, severity, action, state in _ROWS
})


def lookup(code: int) -> XidInfo:
    """The catalog entry; an unknown code is reported with what is known about it."""
    known = CATALOG.get(code)
    if known is not None:
        return known
    return XidInfo(code, f"XID_{code}", f"XID {code} (not in this agent's catalog)",
                   Severity.ERROR, "CHECK_CATALOG", HealthState.OK)
