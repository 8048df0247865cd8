//! Picks the widest vector unit the CPU has for the hot loops. The library is built for
//! the baseline target (SSE2 on x86-64) so it loads everywhere; hot loops also exist as
//! copies compiled with AVX2/FMA/F16C (see `multiversion!`), chosen at run time, and a
//! few have hand-written AVX2 and AVX-512 kernels picked by [`Isa::best`].

/// An instruction set a hand-written kernel exists for. Every kernel also has a portable
/// path ([`Isa::Scalar`]) computing the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Portable Rust (the baseline target, auto-vectorized where the compiler manages).
    Scalar,
    /// AVX2 + FMA + F16C.
    Avx2,
    /// AVX-512 F/BW/VL (with AVX2 + FMA + F16C).
    Avx512,
}

impl Isa {
    /// The widest instruction set this CPU supports (checked once).
    #[inline]
    pub fn best() -> Isa {
        if has_avx512() {
            Isa::Avx512
        } else if has_avx2() {
            Isa::Avx2
        } else {
            Isa::Scalar
        }
    }

    /// Every instruction set this CPU supports, narrowest first (tests compare each path).
    pub fn supported() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|&isa| isa <= Isa::best())
            .collect()
    }
}

/// Whether the AVX-512 kernels (F, BW, VL, plus everything [`has_avx2`] needs) may run on
/// this CPU (checked once).
#[inline]
pub fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use once_cell::sync::Lazy;
        static HAS_AVX512: Lazy<bool> = Lazy::new(|| {
            has_avx2()
                && is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
        });
        *HAS_AVX512
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX2 + FMA + F16C copies of the hot loops may run on this CPU (checked once).
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use once_cell::sync::Lazy;
        static HAS_AVX2: Lazy<bool> = Lazy::new(|| {
            is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
        });
        *HAS_AVX2
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Defines `fn $name<generics>(args) [-> ret]` that runs `$body` compiled for AVX2/FMA/F16C when
/// [`has_avx2`] says so, else compiled for the baseline target.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident<$($g:ident: $bound:path),*>($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn body_avx2<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? {
                body::<$($g),*>($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if $crate::simd::has_avx2() {
                // SAFETY: the CPU supports every feature `body_avx2` is compiled for.
                return unsafe { body_avx2::<$($g),*>($($arg),*) };
            }
            body::<$($g),*>($($arg),*)
        }
    };
}
pub(crate) use multiversion;
