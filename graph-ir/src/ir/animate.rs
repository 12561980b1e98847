//! Kernel scalars animated by `frame`: the closed expressions the graph's
//! parameter references (`graph::refs`) leave for the runtime, which sets
//! each scalar before every frame as a slider does (no recompilation).

/// A closed expression: references resolved, only `frame` left free.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Num(f64),
    Frame,
    Ch(String),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

/// A kernel scalar animated by `frame`.
#[derive(Clone, Debug, PartialEq)]
pub struct AnimatedScalar {
    pub kernel: String,
    pub scalar: String,
    pub expr: Expr,
    /// i32/u32 scalars take the value rounded to the nearest integer.
    pub integer: bool,
    /// The declared range (`min`, `max` of the scalar's declaration).
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl AnimatedScalar {
    /// The scalar's value at `frame`. A value outside the declared range
    /// is an error, as `--set` and the editor refuse one (the message
    /// names the frame and the value; callers add the node and scalar).
    pub fn value(&self, frame: u64) -> Result<f64, String> {
        let v = self.expr.eval(frame as f64);
        let v = if self.integer { v.round() } else { v };
        let lo = self.min.unwrap_or(f64::NEG_INFINITY);
        let hi = self.max.unwrap_or(f64::INFINITY);
        if !(lo..=hi).contains(&v) {
            return Err(format!(
                "scalar '{}' at frame {}: its expression gives {}, outside its range {} to {}",
                self.scalar, frame, v, lo, hi
            ));
        }
        Ok(v)
    }
}

impl Expr {
    pub fn eval(&self, frame: f64) -> f64 {
        match self {
            Expr::Num(x) => *x,
            Expr::Frame => frame,
            // Resolved away before evaluation.
            Expr::Ch(_) => f64::NAN,
            Expr::Neg(a) => -a.eval(frame),
            Expr::Bin(op, a, b) => {
                let (a, b) = (a.eval(frame), b.eval(frame));
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    '/' => a / b,
                    '%' => a % b,
                    _ => a.powf(b),
                }
            }
            Expr::Call(f, args) => {
                let v: Vec<f64> = args.iter().map(|a| a.eval(frame)).collect();
                match f.as_str() {
                    "sin" => v[0].sin(),
                    "cos" => v[0].cos(),
                    "tan" => v[0].tan(),
                    "abs" => v[0].abs(),
                    "floor" => v[0].floor(),
                    "ceil" => v[0].ceil(),
                    "sqrt" => v[0].sqrt(),
                    "exp" => v[0].exp(),
                    "ln" => v[0].ln(),
                    "min" => v[0].min(v[1]),
                    "max" => v[0].max(v[1]),
                    "pow" => v[0].powf(v[1]),
                    _ => v[0].max(v[1]).min(v[2]),
                }
            }
        }
    }
}
