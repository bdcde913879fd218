package dev.taco.kernels.cuda;

import java.util.HashMap;
import java.util.Map;

/**
 * The {@code CUresult} codes of the CUDA driver API (CUDA 13.0 {@code cuda.h}), used to name a status
 * when the driver itself cannot ({@code cuGetErrorName} unavailable because libcuda is not loaded, or
 * the code is newer than the loaded driver).
 *
 * <p>Reference: CUDA Driver API, "Data types used by CUDA driver", {@code enum cudaError_enum}.
 */
public final class CudaErrors {
  private static final Map<Integer, String> NAMES = names();

  private CudaErrors() {}

  /**
   * The symbolic name of a driver status.
   *
   * @param code a {@code CUresult} value
   * @return e.g. {@code "CUDA_ERROR_INVALID_VALUE"} for 1, or {@code "CUDA_ERROR_UNRECOGNIZED_<code>"}
   *         for a code not in the CUDA 13.0 enum
   */
  public static String name(int code) {
    String n = NAMES.get(code);
    return n != null ? n : "CUDA_ERROR_UNRECOGNIZED_" + code;
  }

  /**
   * @param code a {@code CUresult} value
   * @return whether the code is in the CUDA 13.0 enum
   */
  public static boolean known(int code) { return NAMES.containsKey(code); }

  /** @return an unmodifiable copy of the table, code → name */
  public static Map<Integer, String> table() {
    return Map.copyOf(NAMES);
  }

  private static Map<Integer, String> names() {
    Map<Integer, String> m = new HashMap<>();
    m.put(0, "CUDA_SUCCESS");
    m.put(1, "CUDA_ERROR_INVALID_VALUE");
    m.put(2, "CUDA_ERROR_OUT_OF_MEMORY");
    m.put(3, "CUDA_ERROR_NOT_INITIALIZED");
    m.put(4, "CUDA_ERROR_DEINITIALIZED");
    m.put(5, "CUDA_ERROR_PROFILER_DISABLED");
    m.put(6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED");
    m.put(7, "CUDA_ERROR_PROFILER_ALREADY_STARTED");
    m.put(8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED");
    m.put(34, "CUDA_ERROR_STUB_LIBRARY");
    m.put(36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER");
    m.put(46, "CUDA_ERROR_DEVICE_UNAVAILABLE");
    m.put(100, "CUDA_ERROR_NO_DEVICE");
    m.put(101, "CUDA_ERROR_INVALID_DEVICE");
    m.put(102, "CUDA_ERROR_DEVICE_NOT_LICENSED");
    m.put(200, "CUDA_ERROR_INVALID_IMAGE");
    m.put(201, "CUDA_ERROR_INVALID_CONTEXT");
    m.put(202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT");
    m.put(205, "CUDA_ERROR_MAP_FAILED");
    m.put(206, "CUDA_ERROR_UNMAP_FAILED");
    m.put(207, "CUDA_ERROR_ARRAY_IS_MAPPED");
    m.put(208, "CUDA_ERROR_ALREADY_MAPPED");
    m.put(209, "CUDA_ERROR_NO_BINARY_FOR_GPU");
    m.put(210, "CUDA_ERROR_ALREADY_ACQUIRED");
    m.put(211, "CUDA_ERROR_NOT_MAPPED");
    m.put(212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY");
    m.put(213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER");
    m.put(214, "CUDA_ERROR_ECC_UNCORRECTABLE");
    m.put(215, "CUDA_ERROR_UNSUPPORTED_LIMIT");
    m.put(216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE");
    m.put(217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED");
    m.put(218, "CUDA_ERROR_INVALID_PTX");
    m.put(219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT");
    m.put(220, "CUDA_ERROR_NVLINK_UNCORRECTABLE");
    m.put(221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND");
    m.put(222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
    m.put(223, "CUDA_ERROR_JIT_COMPILATION_DISABLED");
    m.put(224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY");
    m.put(225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC");
    m.put(226, "CUDA_ERROR_CONTAINED");
    m.put(300, "CUDA_ERROR_INVALID_SOURCE");
    m.put(301, "CUDA_ERROR_FILE_NOT_FOUND");
    m.put(302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND");
    m.put(303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED");
    m.put(304, "CUDA_ERROR_OPERATING_SYSTEM");
    m.put(400, "CUDA_ERROR_INVALID_HANDLE");
    m.put(401, "CUDA_ERROR_ILLEGAL_STATE");
    m.put(402, "CUDA_ERROR_LOSSY_QUERY");
    m.put(500, "CUDA_ERROR_NOT_FOUND");
    m.put(600, "CUDA_ERROR_NOT_READY");
    m.put(700, "CUDA_ERROR_ILLEGAL_ADDRESS");
    m.put(701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
    m.put(702, "CUDA_ERROR_LAUNCH_TIMEOUT");
    m.put(703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING");
    m.put(704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED");
    m.put(705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED");
    m.put(708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE");
    m.put(709, "CUDA_ERROR_CONTEXT_IS_DESTROYED");
    m.put(710, "CUDA_ERROR_ASSERT");
    m.put(711, "CUDA_ERROR_TOO_MANY_PEERS");
    m.put(712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED");
    m.put(713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED");
    m.put(714, "CUDA_ERROR_HARDWARE_STACK_ERROR");
    m.put(715, "CUDA_ERROR_ILLEGAL_INSTRUCTION");
    m.put(716, "CUDA_ERROR_MISALIGNED_ADDRESS");
    m.put(717, "CUDA_ERROR_INVALID_ADDRESS_SPACE");
    m.put(718, "CUDA_ERROR_INVALID_PC");
    m.put(719, "CUDA_ERROR_LAUNCH_FAILED");
    m.put(720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE");
    m.put(721, "CUDA_ERROR_TENSOR_MEMORY_LEAK");
    m.put(800, "CUDA_ERROR_NOT_PERMITTED");
    m.put(801, "CUDA_ERROR_NOT_SUPPORTED");
    m.put(802, "CUDA_ERROR_SYSTEM_NOT_READY");
    m.put(803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH");
    m.put(804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE");
    m.put(805, "CUDA_ERROR_MPS_CONNECTION_FAILED");
    m.put(806, "CUDA_ERROR_MPS_RPC_FAILURE");
    m.put(807, "CUDA_ERROR_MPS_SERVER_NOT_READY");
    m.put(808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED");
    m.put(809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED");
    m.put(810, "CUDA_ERROR_MPS_CLIENT_TERMINATED");
    m.put(811, "CUDA_ERROR_CDP_NOT_SUPPORTED");
    m.put(812, "CUDA_ERROR_CDP_VERSION_MISMATCH");
    m.put(900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
    m.put(901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
    m.put(902, "CUDA_ERROR_STREAM_CAPTURE_MERGE");
    m.put(903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED");
    m.put(904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED");
    m.put(905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION");
    m.put(906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT");
    m.put(907, "CUDA_ERROR_CAPTURED_EVENT");
    m.put(908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD");
    m.put(909, "CUDA_ERROR_TIMEOUT");
    m.put(910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE");
    m.put(911, "CUDA_ERROR_EXTERNAL_DEVICE");
    m.put(912, "CUDA_ERROR_INVALID_CLUSTER_SIZE");
    m.put(913, "CUDA_ERROR_FUNCTION_NOT_LOADED");
    m.put(914, "CUDA_ERROR_INVALID_RESOURCE_TYPE");
    m.put(915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION");
    m.put(916, "CUDA_ERROR_KEY_ROTATION");
    m.put(999, "CUDA_ERROR_UNKNOWN");
    return m;
  }
}
