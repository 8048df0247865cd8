//! The epilogue of a GEMV: what is done with each sum `v = (W x)[t][row]` before it is
//! stored — a bias, an activated gate, a residual, y's type — and its f32 arithmetic on the
//! host (`q4vk_gemv_host`), the same as the device kernels' (`shaders/epilogue.glsl`).

/// An activation applied to the gate operand of an epilogue, which then multiplies the sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GateActivation {
    /// `silu(g) = g / (1 + e^-g)` (SwiGLU).
    Silu,
    /// GELU in its tanh form, `0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))` (GeGLU).
    GeluTanh,
}

/// What a GEMV or GEMM kernel does with each sum `v = (W x)[t][row]` before it stores it
/// (`shaders/epilogue.glsl`): `v += bias[row]`, then `v = act(gate[t][row]) · v`, then
/// `v += residual[t][row]`, stored as f32 or f16. The gate and the residual have y's type
/// and strides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Epilogue {
    /// A bias of n values is added: `Some(true)` f16 values, `Some(false)` f32.
    pub bias_f16: Option<bool>,
    /// The gate operand and its activation.
    pub gate: Option<GateActivation>,
    /// A residual (y's shape and type) is added last.
    pub residual: bool,
    /// The residual is y itself (an in-place add): the kernels read it through y's own
    /// binding, the one they write, so that each element is read before it is stored. (The
    /// operand binding is declared read-only, which lets a compiler move its reads past the
    /// kernel's writes to y.)
    pub residual_is_y: bool,
    /// y (and the gate and residual) are f16; else f32.
    pub y_f16: bool,
}

impl Epilogue {
    /// The plain store: f32 y = W x.
    pub const NONE: Epilogue = Epilogue {
        bias_f16: None,
        gate: None,
        residual: false,
        residual_is_y: false,
        y_f16: false,
    };

    /// The device kernels' specialization constant 20 (the `EPI_*` bits of
    /// `shaders/epilogue.glsl`).
    pub fn spec_value(&self) -> u32 {
        let mut bits = 0;
        if let Some(f16) = self.bias_f16 {
            bits |= 1 | if f16 { 2 } else { 0 };
        }
        if self.residual {
            bits |= 4;
        }
        bits |= match self.gate {
            None => 0,
            Some(GateActivation::Silu) => 8,
            Some(GateActivation::GeluTanh) => 16,
        };
        if self.y_f16 {
            bits |= 32;
        }
        if self.residual && self.residual_is_y {
            bits |= 64;
        }
        bits
    }

    /// Bytes of `elems` values of y's type (f16 counted in whole 32-bit words, as the
    /// kernels access them).
    pub fn y_bytes(&self, elems: u64) -> u64 {
        value_bytes(elems, self.y_f16)
    }
}

impl GateActivation {
    /// The activation of `g` in f32, as the kernels compute it.
    pub fn of(self, g: f32) -> f32 {
        match self {
            GateActivation::Silu => g / (1.0 + (-g).exp()),
            GateActivation::GeluTanh => {
                // tanh's argument clamped where tanh is ±1 in f32 already.
                let t = (0.797_884_6 * (g + 0.044_715 * g * g * g)).clamp(-10.0, 10.0);
                0.5 * g * (1.0 + t.tanh())
            }
        }
    }
}

/// Bytes of `elems` f16 (in whole 32-bit words) or f32 values.
pub fn value_bytes(elems: u64, f16: bool) -> u64 {
    match f16 {
        true => 4 * elems.div_ceil(2),
        false => 4 * elems,
    }
}

/// The operands of an epilogue applied on the host, as f32 values: the bias (n), and the
/// gate and residual laid out as y.
#[derive(Debug, Clone, Default)]
pub struct HostOperands {
    /// n values added to every row.
    pub bias: Option<Vec<f32>>,
    /// Values whose activation multiplies the sums.
    pub gate: Option<Vec<f32>>,
    /// Values added last.
    pub residual: Option<Vec<f32>>,
}

/// Applies `epi` to `y` (dense rows of `n` sums) with `ops`, in the kernels' order: bias,
/// gate, residual. `epi.y_f16` is the caller's to refuse (y here is f32).
pub fn apply_on_host(y: &mut [f32], n: usize, epi: &Epilogue, ops: &HostOperands) {
    for (at, v) in y.iter_mut().enumerate() {
        let mut value = *v;
        if let Some(b) = &ops.bias {
            value += b[at % n];
        }
        if let (Some(act), Some(g)) = (epi.gate, &ops.gate) {
            value *= act.of(g[at]);
        }
        if let Some(r) = &ops.residual {
            value += r[at];
        }
        *v = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_match_their_f64_forms_and_stay_finite_in_the_tails() {
        for g in [
            -120.0f32, -20.0, -3.5, -1.0, -0.25, 0.0, 0.5, 2.0, 9.0, 120.0,
        ] {
            let s = g as f64 / (1.0 + (-g as f64).exp());
            let c = (2.0 / std::f64::consts::PI).sqrt();
            let gf = g as f64;
            let e = 0.5 * gf * (1.0 + (c * (gf + 0.044715 * gf * gf * gf)).tanh());
            let silu = GateActivation::Silu.of(g) as f64;
            let gelu = GateActivation::GeluTanh.of(g) as f64;
            assert!(
                (silu - s).abs() <= 1e-6 * (1.0 + s.abs()),
                "silu({g}) = {silu}, want {s}"
            );
            assert!(
                (gelu - e).abs() <= 1e-6 * (1.0 + e.abs()),
                "gelu({g}) = {gelu}, want {e}"
            );
        }
    }

    #[test]
    fn host_epilogue_runs_bias_then_gate_then_residual() {
        let mut y = vec![1.0f32, 2.0, 3.0, 4.0];
        let epi = Epilogue {
            bias_f16: Some(false),
            gate: Some(GateActivation::Silu),
            residual: true,
            ..Epilogue::NONE
        };
        let ops = HostOperands {
            bias: Some(vec![0.5, -1.0]),
            gate: Some(vec![0.0, 1.0, -2.0, 3.0]),
            residual: Some(vec![10.0, 20.0, 30.0, 40.0]),
        };
        apply_on_host(&mut y, 2, &epi, &ops);
        let want: Vec<f32> = [
            (1.5f32, 0.0f32, 10.0f32),
            (1.0, 1.0, 20.0),
            (3.5, -2.0, 30.0),
            (3.0, 3.0, 40.0),
        ]
        .iter()
        .map(|&(v, g, r)| v * GateActivation::Silu.of(g) + r)
        .collect();
        assert_eq!(y, want);
    }
}
