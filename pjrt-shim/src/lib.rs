//! tpuport's PJRT shim: a PJRT plugin that stands in front of a CPU PJRT plugin, so that
//! TorchTPU 0.2.0 runs on XLA:CPU (`tpuport run --target xla-cpu`).
//!
//! TorchTPU loads "the TPU plugin" from whatever shared library `TPU_LIBRARY_PATH` names and
//! calls its `GetPjrtApi`. Pointed at a CPU plugin it works, except for one call: TorchTPU always
//! passes the TPU-only client option `premapped_buffer_size` to `PJRT_Client_Create`, and every
//! CPU plugin rejects options it does not know ("Unexpected option name passed to
//! PJRT_Client_Create"). So this library:
//!
//! - `dlopen`s the real plugin named by `PJRT_SHIM_REAL` and calls its `GetPjrtApi`;
//! - returns a copy of that `PJRT_Api` (all `struct_size` bytes, so every later API version
//!   forwards unchanged) in which only `PJRT_Client_Create` is replaced;
//! - the replacement drops the client options, except those named in `PJRT_SHIM_KEEP`
//!   (comma-separated), adds the integer options of `PJRT_SHIM_SET` (`name=value,...`: tpuport
//!   sets `cpu_device_count=1`, so the CPU client has one device, as a one-chip TPU process
//!   sees), calls the real function, and restores the caller's arguments.
//!
//! `PJRT_SHIM_VERBOSE=1` logs each option kept or dropped to stderr. Nothing else changes:
//! buffers, compiles and executions go straight to the real plugin.
//!
//! The layout used here is the head of `pjrt_c_api.h`'s `PJRT_Api`, which the PJRT C API only
//! ever extends at the end: `struct_size`, `extension_start`, `pjrt_api_version`, then ten
//! functions (errors, plugin, events) before `PJRT_Client_Create`. The same holds for
//! `PJRT_Client_Create_Args` (options first) and `PJRT_NamedValue` (whose own `struct_size` is
//! used as the array stride).

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// `PJRT_Api_Version`.
#[repr(C)]
pub struct ApiVersion {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub major_version: c_int,
    pub minor_version: c_int,
}

/// `PJRT_Client_Create`'s signature: `PJRT_Error* (*)(PJRT_Client_Create_Args*)`.
pub type ClientCreate = unsafe extern "C" fn(*mut ClientCreateArgs) -> *mut c_void;

/// The head of `PJRT_Api`, up to and including `PJRT_Client_Create`.
#[repr(C)]
pub struct ApiHead {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub pjrt_api_version: ApiVersion,
    /// `PJRT_Error_Destroy` … `PJRT_Event_OnReady`.
    pub before_client_create: [*const c_void; 10],
    pub client_create: Option<ClientCreate>,
}

/// The head of `PJRT_Client_Create_Args`: the options this shim filters.
#[repr(C)]
pub struct ClientCreateArgs {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub create_options: *const NamedValue,
    pub num_options: usize,
}

/// `PJRT_NamedValue_kInt64`.
pub const NAMED_VALUE_INT64: c_int = 1;

/// `PJRT_NamedValue`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NamedValue {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub name: *const c_char,
    pub name_size: usize,
    pub value_type: c_int,
    /// The value union (a pointer, an int64, a float or a bool).
    pub value: u64,
    pub value_size: usize,
}

impl NamedValue {
    /// The option's name (lossy: names are ASCII in practice).
    ///
    /// # Safety
    /// `name` must point to `name_size` readable bytes.
    pub unsafe fn name(&self) -> String {
        if self.name.is_null() {
            return String::new();
        }
        let bytes = unsafe { std::slice::from_raw_parts(self.name.cast::<u8>(), self.name_size) };
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// The real plugin's `PJRT_Client_Create`, called by [`client_create`].
static REAL_CLIENT_CREATE: AtomicUsize = AtomicUsize::new(0);
/// The copy of the real `PJRT_Api` handed to the framework (built once per process).
static API_COPY: AtomicPtr<ApiHead> = AtomicPtr::new(std::ptr::null_mut());
/// What the replacement does with the options (`PJRT_SHIM_KEEP`, `PJRT_SHIM_SET`).
static OPTIONS: Mutex<Options> = Mutex::new(Options {
    keep: Vec::new(),
    set: Vec::new(),
});

/// The client options the shim passes through and the ones it adds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Names of the caller's options passed through; every other one is dropped.
    pub keep: Vec<String>,
    /// Integer options added (after the kept ones), with their names NUL-terminated.
    pub set: Vec<(CString, i64)>,
}

impl Options {
    /// From `PJRT_SHIM_KEEP` (names separated by commas) and `PJRT_SHIM_SET`
    /// (`name=integer` pairs separated by commas).
    pub fn parse(keep: &str, set: &str) -> Result<Options, String> {
        let mut o = Options {
            keep: parse_keep(keep),
            set: vec![],
        };
        for pair in parse_keep(set) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("PJRT_SHIM_SET: `{pair}` is not name=integer"))?;
            let value: i64 = value
                .trim()
                .parse()
                .map_err(|_| format!("PJRT_SHIM_SET: `{pair}`: the value is not an integer"))?;
            let name = CString::new(name.trim())
                .map_err(|_| format!("PJRT_SHIM_SET: `{pair}` has a NUL byte"))?;
            o.set.push((name, value));
        }
        Ok(o)
    }
}
/// Serialises the first `GetPjrtApi` against a concurrent one.
static INIT: Mutex<()> = Mutex::new(());

fn verbose() -> bool {
    std::env::var_os("PJRT_SHIM_VERBOSE").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Parses `PJRT_SHIM_KEEP`: option names separated by commas (exact names, spaces trimmed).
pub fn parse_keep(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// The replacement `PJRT_Client_Create`: the real one, called with only the kept options.
///
/// # Safety
/// Called by the PJRT framework with valid arguments, after [`forward`] set the real function.
pub unsafe extern "C" fn client_create(args: *mut ClientCreateArgs) -> *mut c_void {
    let real = REAL_CLIENT_CREATE.load(Ordering::Acquire);
    if real == 0 || args.is_null() {
        // Cannot happen through GetPjrtApi; refuse rather than jump to nowhere.
        eprintln!(
            "[tpuport pjrt-shim] PJRT_Client_Create called before the real plugin was loaded"
        );
        std::process::abort();
    }
    // SAFETY: `real` was stored from a non-null `PJRT_Client_Create` of the real plugin.
    let real: ClientCreate = unsafe { std::mem::transmute::<usize, ClientCreate>(real) };
    let a = unsafe { &mut *args };
    let (orig, n) = (a.create_options, a.num_options);
    let opts = OPTIONS.lock().map(|k| k.clone()).unwrap_or_default();
    if (n == 0 || orig.is_null()) && opts.set.is_empty() {
        return unsafe { real(args) };
    }
    // The caller's element size: its own header's sizeof(PJRT_NamedValue).
    let own = std::mem::size_of::<NamedValue>();
    let stride = if n == 0 || orig.is_null() {
        own
    } else {
        unsafe { (*orig).struct_size }.max(own)
    };
    let mut kept: Vec<u8> = Vec::with_capacity(stride * (n + opts.set.len()));
    let mut count = 0usize;
    let keep = &opts.keep;
    for i in 0..n {
        let item = unsafe { orig.cast::<u8>().add(i * stride) };
        let nv = unsafe { &*item.cast::<NamedValue>() };
        let name = unsafe { nv.name() };
        let keep_it = keep.contains(&name);
        if verbose() {
            eprintln!(
                "[tpuport pjrt-shim] PJRT_Client_Create option '{name}' (type {}): {}",
                nv.value_type,
                if keep_it { "kept" } else { "dropped" }
            );
        }
        if keep_it {
            kept.extend_from_slice(unsafe { std::slice::from_raw_parts(item, stride) });
            count += 1;
        }
    }
    for (name, value) in &opts.set {
        let nv = NamedValue {
            struct_size: stride,
            extension_start: std::ptr::null_mut(),
            name: name.as_ptr(),
            name_size: name.as_bytes().len(),
            value_type: NAMED_VALUE_INT64,
            value: *value as u64,
            value_size: 1,
        };
        if verbose() {
            eprintln!("[tpuport pjrt-shim] PJRT_Client_Create option {name:?} = {value}: added");
        }
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&raw const nv).cast::<u8>(),
                std::mem::size_of::<NamedValue>(),
            )
        };
        kept.extend_from_slice(bytes);
        kept.resize(kept.len() + (stride - own), 0);
        count += 1;
    }
    // Keep the array 8-byte aligned for the callee.
    let mut aligned: Vec<u64> = vec![0; (kept.len() / 8) + 1];
    unsafe {
        std::ptr::copy_nonoverlapping(kept.as_ptr(), aligned.as_mut_ptr().cast::<u8>(), kept.len())
    };
    a.create_options = if count == 0 {
        std::ptr::null()
    } else {
        aligned.as_ptr().cast::<NamedValue>()
    };
    a.num_options = count;
    let err = unsafe { real(args) };
    a.create_options = orig;
    a.num_options = n;
    err
}

/// Builds the `PJRT_Api` to hand out: a copy of `real` (all its `struct_size` bytes) with
/// `PJRT_Client_Create` replaced by [`client_create`]. The copy lives for the process.
///
/// # Safety
/// `real` must point to a valid `PJRT_Api` of `struct_size` bytes that outlives the process.
pub unsafe fn forward(real: *const ApiHead, options: Options) -> Result<*const ApiHead, String> {
    if real.is_null() {
        return Err("the real plugin's GetPjrtApi returned NULL".into());
    }
    let size = unsafe { (*real).struct_size };
    if size < std::mem::size_of::<ApiHead>() {
        return Err(format!(
            "the real plugin's PJRT_Api is {size} bytes, too small to hold PJRT_Client_Create"
        ));
    }
    let Some(create) = (unsafe { (*real).client_create }) else {
        return Err("the real plugin has no PJRT_Client_Create".into());
    };
    // u64 words keep the copy aligned like the original.
    let mut copy: Vec<u64> = vec![0; size.div_ceil(8)];
    unsafe {
        std::ptr::copy_nonoverlapping(real.cast::<u8>(), copy.as_mut_ptr().cast::<u8>(), size)
    };
    let copy = Box::leak(copy.into_boxed_slice())
        .as_mut_ptr()
        .cast::<ApiHead>();
    unsafe { (*copy).client_create = Some(client_create) };
    if let Ok(mut o) = OPTIONS.lock() {
        *o = options;
    }
    REAL_CLIENT_CREATE.store(create as usize, Ordering::Release);
    Ok(copy)
}

/// `dlopen`s `path` and calls its `GetPjrtApi`.
fn load_real(path: &str) -> Result<*const ApiHead, String> {
    let c = CString::new(path).map_err(|_| format!("PJRT_SHIM_REAL has a NUL byte: {path:?}"))?;
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            "unknown error".to_string()
        } else {
            unsafe { CStr::from_ptr(why) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(format!("cannot load {path}: {why}"));
    }
    let sym = unsafe { libc::dlsym(handle, c"GetPjrtApi".as_ptr()) };
    if sym.is_null() {
        return Err(format!(
            "{path} exports no GetPjrtApi: it is not a PJRT plugin"
        ));
    }
    // SAFETY: GetPjrtApi is `const PJRT_Api* GetPjrtApi(void)` in every PJRT plugin.
    let get: unsafe extern "C" fn() -> *const ApiHead = unsafe { std::mem::transmute(sym) };
    Ok(unsafe { get() })
}

/// The PJRT plugin entry point TorchTPU calls.
///
/// # Safety
/// Called by the PJRT framework's plugin loader.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn GetPjrtApi() -> *const ApiHead {
    let _guard = INIT.lock();
    let ready = API_COPY.load(Ordering::Acquire);
    if !ready.is_null() {
        return ready;
    }
    let Some(path) = std::env::var_os("PJRT_SHIM_REAL").filter(|p| !p.is_empty()) else {
        eprintln!(
            "[tpuport pjrt-shim] PJRT_SHIM_REAL is not set: it must name the CPU PJRT plugin to forward to (tpuport run --target xla-cpu sets it)"
        );
        return std::ptr::null();
    };
    let path = path.to_string_lossy().into_owned();
    let options = Options::parse(
        &std::env::var("PJRT_SHIM_KEEP").unwrap_or_default(),
        &std::env::var("PJRT_SHIM_SET").unwrap_or_default(),
    );
    match options.and_then(|o| load_real(&path).and_then(|real| unsafe { forward(real, o) })) {
        Ok(api) => {
            if verbose() {
                let v = unsafe { &(*api).pjrt_api_version };
                eprintln!(
                    "[tpuport pjrt-shim] forwarding to {path} (PJRT API {}.{}, {} bytes)",
                    v.major_version,
                    v.minor_version,
                    unsafe { (*api).struct_size }
                );
            }
            API_COPY.store(api.cast_mut(), Ordering::Release);
            api
        }
        Err(e) => {
            eprintln!("[tpuport pjrt-shim] {e}");
            std::ptr::null()
        }
    }
}

#[cfg(test)]
mod tests;
