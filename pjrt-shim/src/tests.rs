use super::*;

/// [`forward`] sets process-wide state: the tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());
/// What the fake real `PJRT_Client_Create` was given.
static SEEN: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());

unsafe extern "C" fn fake_create(args: *mut ClientCreateArgs) -> *mut c_void {
    let a = unsafe { &*args };
    let mut seen = SEEN.lock().unwrap();
    seen.clear();
    let stride = if a.num_options > 0 {
        unsafe { (*a.create_options).struct_size }
    } else {
        0
    };
    for i in 0..a.num_options {
        let nv = unsafe {
            &*a.create_options
                .cast::<u8>()
                .add(i * stride)
                .cast::<NamedValue>()
        };
        seen.push((unsafe { nv.name() }, nv.value));
    }
    std::ptr::null_mut()
}

/// Options laid out with a given element size (a newer header may have a larger one).
fn options(names: &[&'static str], stride: usize) -> Vec<u64> {
    let mut words = vec![0u64; names.len() * stride / 8];
    for (i, name) in names.iter().enumerate() {
        let nv = NamedValue {
            struct_size: stride,
            extension_start: std::ptr::null_mut(),
            name: name.as_ptr().cast(),
            name_size: name.len(),
            value_type: 1, // PJRT_NamedValue_kInt64
            value: 100 + i as u64,
            value_size: 1,
        };
        unsafe {
            std::ptr::write(
                words
                    .as_mut_ptr()
                    .cast::<u8>()
                    .add(i * stride)
                    .cast::<NamedValue>(),
                nv,
            )
        };
    }
    words
}

/// A fake plugin's `PJRT_Api`: the head, then two more functions the copy must keep.
fn fake_api() -> Vec<u64> {
    let head = std::mem::size_of::<ApiHead>();
    let mut words = vec![0u64; head / 8 + 2];
    let api = words.as_mut_ptr().cast::<ApiHead>();
    unsafe {
        (*api).struct_size = head + 16;
        (*api).pjrt_api_version.major_version = 0;
        (*api).pjrt_api_version.minor_version = 115;
        for (i, f) in (*api).before_client_create.iter_mut().enumerate() {
            *f = (0x1000 + i) as *const c_void;
        }
        (*api).client_create = Some(fake_create);
    }
    words[head / 8] = 0xdead;
    words[head / 8 + 1] = 0xbeef;
    words
}

#[test]
fn the_copy_forwards_everything_but_client_create_which_drops_options_not_kept() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let real = fake_api();
    let copy =
        unsafe { forward(real.as_ptr().cast(), Options::parse("keep_me", "").unwrap()) }.unwrap();
    let head = std::mem::size_of::<ApiHead>();
    // Every byte but PJRT_Client_Create is the real plugin's (the functions after it too).
    let copied = unsafe { std::slice::from_raw_parts(copy.cast::<u64>(), head / 8 + 2) };
    let create_word = head / 8 - 1;
    for (i, (a, b)) in copied.iter().zip(&real).enumerate() {
        if i == create_word {
            assert_ne!(a, b, "PJRT_Client_Create must be replaced");
        } else {
            assert_eq!(a, b, "word {i} of the PJRT_Api differs");
        }
    }
    assert_eq!(unsafe { (*copy).pjrt_api_version.minor_version }, 115);

    for stride in [std::mem::size_of::<NamedValue>(), 80] {
        let opts = options(&["premapped_buffer_size", "keep_me", "other"], stride);
        let mut args = ClientCreateArgs {
            struct_size: 88,
            extension_start: std::ptr::null_mut(),
            create_options: opts.as_ptr().cast(),
            num_options: 3,
        };
        let create = unsafe { (*copy).client_create }.unwrap();
        let err = unsafe { create(&mut args) };
        assert!(err.is_null());
        assert_eq!(
            *SEEN.lock().unwrap(),
            vec![("keep_me".to_string(), 101)],
            "stride {stride}"
        );
        // The caller's arguments are as they were.
        assert_eq!(args.num_options, 3);
        assert_eq!(args.create_options, opts.as_ptr().cast());
    }

    // Nothing kept: the real function sees no options at all.
    unsafe { forward(real.as_ptr().cast(), Options::default()) }.unwrap();
    let opts = options(
        &["premapped_buffer_size"],
        std::mem::size_of::<NamedValue>(),
    );
    let mut args = ClientCreateArgs {
        struct_size: 88,
        extension_start: std::ptr::null_mut(),
        create_options: opts.as_ptr().cast(),
        num_options: 1,
    };
    let create = unsafe { (*copy).client_create }.unwrap();
    unsafe { create(&mut args) };
    assert!(SEEN.lock().unwrap().is_empty());
}

#[test]
fn a_plugin_it_cannot_forward_is_an_error_that_says_why() {
    assert!(
        unsafe { forward(std::ptr::null(), Options::default()) }
            .unwrap_err()
            .contains("NULL")
    );
    let mut small = fake_api();
    small[0] = 64;
    assert!(
        unsafe { forward(small.as_ptr().cast(), Options::default()) }
            .unwrap_err()
            .contains("too small")
    );
    let mut none = fake_api();
    unsafe { (*none.as_mut_ptr().cast::<ApiHead>()).client_create = None };
    assert!(
        unsafe { forward(none.as_ptr().cast(), Options::default()) }
            .unwrap_err()
            .contains("no PJRT_Client_Create")
    );
    assert!(
        load_real("/nonexistent/plugin.so")
            .unwrap_err()
            .contains("cannot load")
    );
}

#[test]
fn keep_lists_are_comma_separated_names() {
    assert_eq!(parse_keep(" a, b ,,c"), vec!["a", "b", "c"]);
    assert!(parse_keep("").is_empty());
}

// ---- the real CPU plugin -------------------------------------------------------------------

#[repr(C)]
struct ErrorArgs {
    struct_size: usize,
    extension_start: *mut c_void,
    error: *mut c_void,
    message: *const c_char,
    message_size: usize,
}

#[repr(C)]
struct FullCreateArgs {
    head: ClientCreateArgs,
    kv: [*mut c_void; 4],
    client: *mut c_void,
    kv_try: [*mut c_void; 2],
}

#[repr(C)]
struct ClientArgs {
    struct_size: usize,
    extension_start: *mut c_void,
    client: *mut c_void,
}

type ArgsFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;

/// The `index`-th function of a `PJRT_Api` (0 = `PJRT_Error_Destroy`).
unsafe fn function(api: *const ApiHead, index: usize) -> ArgsFn {
    let words = api.cast::<*const c_void>();
    let f = unsafe { *words.add(5 + index) };
    assert!(!f.is_null(), "PJRT_Api function {index} is NULL");
    unsafe { std::mem::transmute::<*const c_void, ArgsFn>(f) }
}

/// The error's message (and destroys it); None for no error.
unsafe fn take_error(api: *const ApiHead, err: *mut c_void) -> Option<String> {
    if err.is_null() {
        return None;
    }
    let mut m = ErrorArgs {
        struct_size: std::mem::size_of::<ErrorArgs>(),
        extension_start: std::ptr::null_mut(),
        error: err,
        message: std::ptr::null(),
        message_size: 0,
    };
    unsafe { function(api, 1)((&raw mut m).cast()) };
    let bytes = unsafe { std::slice::from_raw_parts(m.message.cast::<u8>(), m.message_size) };
    let text = String::from_utf8_lossy(bytes).into_owned();
    let mut d = ClientArgs {
        struct_size: 24,
        extension_start: std::ptr::null_mut(),
        client: err,
    };
    unsafe { function(api, 0)((&raw mut d).cast()) };
    Some(text)
}

/// Creates a client with TorchTPU's option; returns the error, or destroys the client.
unsafe fn create_with_premapped_option(api: *const ApiHead) -> Option<String> {
    let opts = options(
        &["premapped_buffer_size"],
        std::mem::size_of::<NamedValue>(),
    );
    let mut args = FullCreateArgs {
        head: ClientCreateArgs {
            struct_size: std::mem::size_of::<FullCreateArgs>(),
            extension_start: std::ptr::null_mut(),
            create_options: opts.as_ptr().cast(),
            num_options: 1,
        },
        kv: [std::ptr::null_mut(); 4],
        client: std::ptr::null_mut(),
        kv_try: [std::ptr::null_mut(); 2],
    };
    let create = unsafe { (*api).client_create }.unwrap();
    let err = unsafe { create(&mut args.head) };
    if let Some(e) = unsafe { take_error(api, err) } {
        return Some(e);
    }
    assert!(!args.client.is_null(), "no error and no client");
    let mut d = ClientArgs {
        struct_size: 24,
        extension_start: std::ptr::null_mut(),
        client: args.client,
    };
    let err = unsafe { function(api, 11)((&raw mut d).cast()) };
    assert_eq!(unsafe { take_error(api, err) }, None);
    None
}

/// The CPU PJRT plugin tpuport installs (scripts/bootstrap-xla-cpu exports its path as
/// TPUPORT_PJRT_PLUGIN for the tests). Under CI it must be there.
fn real_plugin() -> Option<String> {
    match std::env::var("TPUPORT_PJRT_PLUGIN") {
        Ok(p) if std::path::Path::new(&p).is_file() => Some(p),
        _ => {
            let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
            assert!(
                !ci,
                "TPUPORT_PJRT_PLUGIN must name the CPU PJRT plugin under CI (scripts/test sets it)"
            );
            eprintln!("skipped: TPUPORT_PJRT_PLUGIN is not set (scripts/test sets it)");
            None
        }
    }
}

#[test]
fn the_real_cpu_plugin_rejects_torch_tpus_option_and_takes_it_through_the_shim() {
    let Some(path) = real_plugin() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let real = load_real(&path).unwrap();
    let init = ClientArgs {
        struct_size: 16,
        extension_start: std::ptr::null_mut(),
        client: std::ptr::null_mut(),
    };
    let mut init = init;
    let err = unsafe { function(real, 3)((&raw mut init).cast()) };
    assert_eq!(
        unsafe { take_error(real, err) },
        None,
        "PJRT_Plugin_Initialize"
    );
    let direct = unsafe { create_with_premapped_option(real) };
    assert!(
        direct
            .as_deref()
            .is_some_and(|e| e.contains("premapped_buffer_size")),
        "the plugin itself should reject TorchTPU's option: {direct:?}"
    );
    let shim = unsafe { forward(real, Options::default()) }.unwrap();
    assert_eq!(unsafe { create_with_premapped_option(shim) }, None);
}

#[test]
fn set_options_are_added_after_the_kept_ones_and_bad_ones_are_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let real = fake_api();
    let o = Options::parse("", "cpu_device_count=1, other = -7").unwrap();
    let copy = unsafe { forward(real.as_ptr().cast(), o) }.unwrap();
    let create = unsafe { (*copy).client_create }.unwrap();
    for stride in [std::mem::size_of::<NamedValue>(), 80] {
        let opts = options(&["premapped_buffer_size"], stride);
        let mut args = ClientCreateArgs {
            struct_size: 88,
            extension_start: std::ptr::null_mut(),
            create_options: opts.as_ptr().cast(),
            num_options: 1,
        };
        unsafe { create(&mut args) };
        assert_eq!(
            *SEEN.lock().unwrap(),
            vec![
                ("cpu_device_count".to_string(), 1),
                ("other".to_string(), -7i64 as u64)
            ]
        );
    }
    // No options from the caller at all: the set ones still go in.
    let mut args = ClientCreateArgs {
        struct_size: 88,
        extension_start: std::ptr::null_mut(),
        create_options: std::ptr::null(),
        num_options: 0,
    };
    unsafe { create(&mut args) };
    assert_eq!(SEEN.lock().unwrap().len(), 2);
    assert!(args.create_options.is_null());

    for bad in ["cpu_device_count", "n=one"] {
        let e = Options::parse("", bad).unwrap_err();
        assert!(e.starts_with("PJRT_SHIM_SET: `"), "{e}");
    }
}
