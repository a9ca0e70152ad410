//! Typed kernel launches, and the small upload and read-back helpers the stages share.
//!
//! A kernel is declared once ([`Kernel`], as `decode::gpu::kernels` and `compute` declare theirs) with its parameter
//! list as a type: a tuple of [`Const<T>`] (`const T*`), [`Mut<T>`] (`T*`), `i32` (`int`) and
//! `u64`. A launch takes a tuple of exactly those types, so an argument of the wrong kind or
//! count does not compile, and each argument reaches `cuLaunchKernel` as a pointer to a value
//! of its own size (an `int` as 4 bytes). Every type spells its C type ([`KernelArg::c_type`]);
//! a unit test compares the spellings with the `extern "C"` signatures of the embedded sources.
//!
//! Device memory: the addresses in a [`Const`] or [`Mut`] are plain numbers; the caller of an
//! (unsafe) launch keeps the allocations behind them alive, and large enough, until the kernel
//! is done — until [`Kernel::launch`] returns, or until the decode stream is next waited for
//! after [`Kernel::launch_nowait`].

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use super::profile::{profiling, timed};
use crate::device::nvrtc::Module;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::Result;

/// A type kernels point at, with its C spelling (read by the signature test only).
pub(crate) trait Pointee {
    /// The C type name (`u8`, `int`, `PageJob`, `u64*`).
    #[cfg(test)]
    fn c_name() -> String;

    /// The C spelling of a `const` pointer to it.
    #[cfg(test)]
    fn const_pointer() -> String {
        format!("const {}*", Self::c_name())
    }
}

macro_rules! pointee {
    ($($t:ty => $c:literal),* $(,)?) => {
        $(impl Pointee for $t {
            #[cfg(test)]
            fn c_name() -> String {
                $c.to_string()
            }
        })*
    };
}
pointee!(u8 => "u8", u32 => "u32", i32 => "int", i64 => "i64", u64 => "u64");

/// One kernel parameter, passed to `cuLaunchKernel` as a pointer to the value itself.
///
/// # Safety
/// The value's size and bytes must be those of the C type [`c_type`](Self::c_type) names.
pub(crate) unsafe trait KernelArg: Copy {
    /// The C type of the parameter (`const T*`, `T*`, `int`, `u64`), for the signature test.
    #[cfg(test)]
    fn c_type() -> String;
}

// SAFETY: a C `int` is 4 bytes, little-endian like an i32.
unsafe impl KernelArg for i32 {
    #[cfg(test)]
    fn c_type() -> String {
        "int".into()
    }
}

// SAFETY: i64 is `long long`, 8 bytes, little-endian.
unsafe impl KernelArg for i64 {
    #[cfg(test)]
    fn c_type() -> String {
        "i64".into()
    }
}

// SAFETY: u64 is `unsigned long long`, 8 bytes.
unsafe impl KernelArg for u64 {
    #[cfg(test)]
    fn c_type() -> String {
        "u64".into()
    }
}

/// A `const T*` kernel parameter: the device address of what the kernel reads.
#[repr(transparent)]
pub(crate) struct Const<T>(u64, PhantomData<fn() -> T>);

/// A `T*` kernel parameter: the device address of what the kernel writes (0: null).
#[repr(transparent)]
pub(crate) struct Mut<T>(u64, PhantomData<fn() -> T>);

macro_rules! device_pointer {
    ($($p:ident),*) => {
        $(
            impl<T> $p<T> {
                /// The pointer to device address `addr`.
                pub(crate) fn at(addr: u64) -> Self {
                    $p(addr, PhantomData)
                }
            }

            impl<T> Clone for $p<T> {
                fn clone(&self) -> Self {
                    *self
                }
            }

            impl<T> Copy for $p<T> {}

            impl<T> std::fmt::Debug for $p<T> {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    write!(f, "{}({:#x})", stringify!($p), self.0)
                }
            }
        )*
    };
}
device_pointer!(Const, Mut);

// SAFETY: repr(transparent) over a u64 device address, the size of a device pointer.
unsafe impl<T: Pointee> KernelArg for Const<T> {
    #[cfg(test)]
    fn c_type() -> String {
        T::const_pointer()
    }
}

// SAFETY: repr(transparent) over a u64 device address, the size of a device pointer.
unsafe impl<T: Pointee> KernelArg for Mut<T> {
    #[cfg(test)]
    fn c_type() -> String {
        format!("{}*", T::c_name())
    }
}

/// A table of pointers (`u64* const*`: `Const<Mut<u64>>`).
impl<T: Pointee> Pointee for Mut<T> {
    #[cfg(test)]
    fn c_name() -> String {
        format!("{}*", T::c_name())
    }

    #[cfg(test)]
    fn const_pointer() -> String {
        format!("{}* const*", T::c_name())
    }
}

/// A kernel's parameter list: a tuple of [`KernelArg`]s.
pub(crate) trait KernelArgs {
    /// The C types of the parameters, in order, for the signature test.
    #[cfg(test)]
    fn c_types() -> Vec<String>;

    /// A pointer to each argument, in order, valid while `self` is borrowed.
    fn params(&mut self) -> Vec<*mut c_void>;
}

macro_rules! kernel_args {
    ($($t:ident . $i:tt),+) => {
        impl<$($t: KernelArg),+> KernelArgs for ($($t,)+) {
            #[cfg(test)]
            fn c_types() -> Vec<String> {
                vec![$($t::c_type()),+]
            }

            fn params(&mut self) -> Vec<*mut c_void> {
                vec![$((&mut self.$i as *mut $t).cast::<c_void>()),+]
            }
        }
    };
}
kernel_args!(A.0, B.1, C.2);
kernel_args!(A.0, B.1, C.2, D.3);
kernel_args!(A.0, B.1, C.2, D.3, E.4);
kernel_args!(A.0, B.1, C.2, D.3, E.4, F.5);
kernel_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6);
kernel_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7);
kernel_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8);
kernel_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9);
kernel_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7, I.8, J.9, K.10);

/// An embedded CUDA source, loaded (NVRTC-compiled on first use, cached) under its name.
#[derive(Debug)]
pub(crate) struct KernelModule {
    /// The module's name (its cache key and log name).
    pub(crate) name: &'static str,
    /// CUDA C++ with `extern "C"` kernels.
    pub(crate) source: &'static str,
    /// NVRTC options it is compiled with (besides the architecture).
    pub(crate) options: &'static [&'static str],
}

impl KernelModule {
    /// The module loaded on `gpu`.
    pub(crate) fn load(&self, gpu: &Arc<Gpu>) -> Result<Arc<Module>> {
        gpu.load_module(self.name, self.source, self.options)
    }
}

/// An `extern "C"` kernel of a [`KernelModule`] whose parameters are the tuple `A`.
pub(crate) struct Kernel<A> {
    /// The module that defines it.
    pub(crate) module: &'static KernelModule,
    /// The function's name.
    pub(crate) name: &'static str,
    args: PhantomData<fn(A)>,
}

impl<A> std::fmt::Debug for Kernel<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({}::{})", self.module.name, self.name)
    }
}

impl<A: KernelArgs> Kernel<A> {
    /// Kernel `name` of `module`.
    pub(crate) const fn new(module: &'static KernelModule, name: &'static str) -> Self {
        Kernel {
            module,
            name,
            args: PhantomData,
        }
    }

    /// The C types of its parameters, as declared here.
    #[cfg(test)]
    pub(crate) fn c_types(&self) -> Vec<String> {
        A::c_types()
    }

    /// Launches the kernel over `grid` blocks of `block` threads with `args` on the decode
    /// stream and waits (timed as stage `kernel <name>` while profiling).
    ///
    /// # Safety
    /// `module` must be [`self.module`](Self::module) loaded on `gpu`; every address in `args`
    /// must stay valid, with the sizes the kernel indexes for this grid, until this returns.
    pub(crate) unsafe fn launch(
        &self,
        gpu: &Gpu,
        module: &Module,
        grid: u32,
        block: u32,
        args: A,
    ) -> Result<()> {
        if !profiling() {
            // no stage name to build on every launch unless someone records it
            // SAFETY: forwarded to the caller's contract.
            return unsafe { self.launch_now(gpu, module, grid, block, args) };
        }
        timed(&format!("kernel {}", self.name), || {
            // SAFETY: forwarded to the caller's contract.
            unsafe { self.launch_now(gpu, module, grid, block, args) }
        })
    }

    /// Enqueues the kernel like [`launch`](Self::launch) but returns without waiting: kernels
    /// enqueued this way run in order on the decode stream; `gpu.synchronize_decode()` waits
    /// for them.
    ///
    /// # Safety
    /// As [`launch`](Self::launch), except that every address must stay valid until the caller
    /// has waited with `gpu.synchronize_decode()` (or a later [`launch`](Self::launch), which
    /// waits for the stream).
    pub(crate) unsafe fn launch_nowait(
        &self,
        gpu: &Gpu,
        module: &Module,
        grid: u32,
        block: u32,
        mut args: A,
    ) -> Result<()> {
        let f = module.function(self.name)?;
        // no wait for uploads first: the uploads and memsets the kernel reads have completed
        // (each of DeviceBuffer's copies waits for itself, on the calling thread's own stream)
        let mut params = args.params();
        // SAFETY: the argument types are the kernel's parameters (checked against the source
        // by a unit test), each pointed at by `params` while `args` lives (the driver copies
        // them at the launch); the addresses behind them are the caller's contract.
        unsafe {
            module.launch(
                f,
                (grid.max(1), 1, 1),
                (block, 1, 1),
                0,
                gpu.decode_stream(),
                &mut params,
            )
        }
    }

    /// [`launch`](Self::launch) without the profiling.
    ///
    /// # Safety
    /// As [`launch`](Self::launch).
    unsafe fn launch_now(
        &self,
        gpu: &Gpu,
        module: &Module,
        grid: u32,
        block: u32,
        args: A,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller's contract; waiting below keeps every address valid
        // for as long as the kernel runs.
        unsafe { self.launch_nowait(gpu, module, grid, block, args)? };
        gpu.synchronize_decode()
    }
}

/// A device copy of `bytes` (at least 8 bytes allocated).
pub(crate) fn upload(gpu: &Arc<Gpu>, bytes: &[u8]) -> Result<DeviceBuffer> {
    let mut b = gpu.alloc(bytes.len().max(8))?;
    b.copy_from_host(0, bytes)?;
    Ok(b)
}

/// A structure shared with the kernels, in its C layout (fields in order, each at its natural
/// alignment, zero padding up to `SIZE`).
pub(crate) trait CStruct: Sized {
    /// The C structure's name (for the layout test, like `FIELDS`).
    #[cfg(test)]
    const NAME: &'static str;
    /// `sizeof` in C.
    const SIZE: usize;
    /// (name, C type) of each field, in order (padding left out).
    #[cfg(test)]
    const FIELDS: &'static [(&'static str, &'static str)];
    /// Writes the C layout into `out[..SIZE]` (padding untouched).
    fn write_to(&self, out: &mut [u8]);
    /// Reads the C layout from `b[..SIZE]`.
    fn from_bytes(b: &[u8]) -> Self;

    /// The `SIZE` bytes the kernels read.
    #[cfg(test)]
    fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0; Self::SIZE];
        self.write_to(&mut b);
        b
    }
}

/// Uploads a table of kernel jobs, each in its C layout.
pub(crate) fn upload_table<T: CStruct>(
    gpu: &Arc<Gpu>,
    items: &[T],
) -> Result<DeviceBuffer> {
    let mut bytes = vec![0u8; items.len() * T::SIZE];
    for (item, out) in items.iter().zip(bytes.chunks_exact_mut(T::SIZE)) {
        item.write_to(out);
    }
    upload(gpu, &bytes)
}

/// The little-endian bytes of `v`, for uploading a u32 array.
pub(crate) fn u32s(v: impl IntoIterator<Item = u32>) -> Vec<u8> {
    v.into_iter().flat_map(u32::to_le_bytes).collect()
}

/// The little-endian bytes of `v`, for uploading a u64 array.
pub(crate) fn u64s(v: impl IntoIterator<Item = u64>) -> Vec<u8> {
    v.into_iter().flat_map(u64::to_le_bytes).collect()
}

/// The i32 values of a device array of `n` (one copy): kernels' error words and counts.
pub(crate) fn i32s_from_device(b: &DeviceBuffer, n: usize) -> Result<Vec<i32>> {
    Ok(b.copy_to_host(0..n * 4)?
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The u64 values of a device array of `n` (one copy).
pub(crate) fn u64s_from_device(b: &DeviceBuffer, n: usize) -> Result<Vec<u64>> {
    Ok(b.copy_to_host(0..n * 8)?
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

/// A zero-filled device allocation of at least `len` bytes.
pub(crate) fn zeroed(gpu: &Arc<Gpu>, len: usize) -> Result<DeviceBuffer> {
    let mut b = gpu.alloc(len.max(4))?;
    b.fill(0)?;
    Ok(b)
}

/// A zeroed validity bitmap (32-bit words) for `rows` rows of an optional column.
pub(crate) fn validity_words(
    gpu: &Arc<Gpu>,
    rows: usize,
    optional: bool,
) -> Result<Option<DeviceBuffer>> {
    optional
        .then(|| zeroed(gpu, rows.div_ceil(32) * 4))
        .transpose()
}

/// A field of a job structure: a C scalar, naturally aligned, little-endian.
pub(crate) trait CField: Copy {
    /// The C type (`u64`, `i64`, `int`), for the layout test.
    #[cfg(test)]
    const C_TYPE: &'static str;
    /// Bytes, also the alignment.
    const SIZE: usize;
    /// Writes the value at `out[..SIZE]`.
    fn put(self, out: &mut [u8]);
    /// Reads a value from `b[..SIZE]`.
    fn get(b: &[u8]) -> Self;
}

macro_rules! c_field {
    ($($t:ty => $c:literal),*) => {
        $(impl CField for $t {
            #[cfg(test)]
            const C_TYPE: &'static str = $c;
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut [u8]) {
                out[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b[..Self::SIZE].try_into().unwrap_or_default())
            }
        })*
    };
}
c_field!(u64 => "u64", i64 => "i64", i32 => "int");


/// The offset of a field of `size` bytes placed after `end` bytes, naturally aligned.
pub(crate) const fn field_at(end: usize, size: usize) -> usize {
    end.next_multiple_of(size)
}

/// Declares a Rust mirror of a C job structure: the struct, its [`CStruct`] layout and its
/// [`Pointee`] name (the C name is the Rust name).
macro_rules! c_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident($size:literal bytes) {
            $($(#[$fmeta:meta])* $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        $vis struct $name {
            $($(#[$fmeta])* $vis $field: $ty,)*
        }

        // the C structure holds at least the Rust fields (it may add padding)
        const _: () = assert!(std::mem::size_of::<$name>() <= $size);

        impl $crate::device::launch::CStruct for $name {
            #[cfg(test)]
            const NAME: &'static str = stringify!($name);
            const SIZE: usize = $size;
            #[cfg(test)]
            const FIELDS: &'static [(&'static str, &'static str)] =
                &[$((stringify!($field), <$ty as $crate::device::launch::CField>::C_TYPE)),*];

            fn write_to(&self, out: &mut [u8]) {
                let mut end = 0;
                $(
                    let at = $crate::device::launch::field_at(end, <$ty as $crate::device::launch::CField>::SIZE);
                    $crate::device::launch::CField::put(self.$field, &mut out[at..]);
                    end = at + <$ty as $crate::device::launch::CField>::SIZE;
                )*
                let _ = end;
            }

            fn from_bytes(b: &[u8]) -> Self {
                let mut end = 0;
                $(
                    let at = $crate::device::launch::field_at(end, <$ty as $crate::device::launch::CField>::SIZE);
                    let $field = <$ty as $crate::device::launch::CField>::get(&b[at..]);
                    end = at + <$ty as $crate::device::launch::CField>::SIZE;
                )*
                let _ = end;
                $name { $($field),* }
            }
        }

        impl $crate::device::launch::Pointee for $name {
            #[cfg(test)]
            fn c_name() -> String {
                stringify!($name).to_string()
            }
        }
    };
}
pub(crate) use c_struct;

/// Declares each kernel once: `CONST = function in MODULE(parameter types);`, and the list of
/// them all the signature test walks.
macro_rules! kernels {
    ($($(#[$meta:meta])* $konst:ident = $name:ident in $module:ident($($arg:ty),+ $(,)?);)*) => {
        $(
            $(#[$meta])*
            pub(crate) const $konst: $crate::device::launch::Kernel<($($arg,)+)> =
                $crate::device::launch::Kernel::new(&$module, stringify!($name));
        )*

        /// Every declared kernel: (module, function, parameter C types).
        #[cfg(test)]
        pub(crate) fn declared_kernels() -> Vec<(&'static str, &'static str, Vec<String>)> {
            vec![$(($konst.module.name, $konst.name, $konst.c_types())),*]
        }
    };
}
pub(crate) use kernels;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_types_spell_their_c_types() {
        type Args = (Const<u8>, Const<Mut<u64>>, i32, Mut<i64>, u64, Const<i32>);
        assert_eq!(
            Args::c_types(),
            [
                "const u8*",
                "u64* const*",
                "int",
                "i64*",
                "u64",
                "const int*"
            ]
        );
    }

    #[test]
    fn each_argument_is_passed_with_its_own_size() {
        let mut args = (Mut::<u32>::at(0x1000), 7i32, 9u64);
        let p = args.params();
        // SAFETY: `p` points at the tuple's fields, alive and unchanged here.
        let (a, b, c) = unsafe {
            (
                *p[0].cast::<u64>(),
                *p[1].cast::<i32>(),
                *p[2].cast::<u64>(),
            )
        };
        assert_eq!((a, b, c), (0x1000, 7, 9));
        assert_eq!(std::mem::size_of::<Const<u8>>(), 8);
        assert_eq!(std::mem::size_of::<i32>(), 4);
    }
}
