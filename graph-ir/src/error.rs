//! Errors from loading, validating and compiling a graph. Every variant that
//! concerns a node carries its id, so the CLI and the app can point at it.
//! Outside `graph/` because the runtime's error type carries them too and
//! the runtime never imports the graph document.

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum GraphError {
    /// The file is not valid JSON.
    Syntax {
        line: usize,
        col: usize,
        message: String,
    },
    /// A problem with the document as a whole (format, version, top-level keys).
    Document { message: String },
    /// A problem with a node as a whole (unknown kind, duplicate id, ...).
    Node { node: String, message: String },
    Param {
        node: String,
        param: String,
        message: String,
    },
    Port {
        node: String,
        port: String,
        message: String,
    },
    /// An error in a kernel's code, at line:col of that code.
    Code {
        node: String,
        line: u32,
        col: u32,
        message: String,
    },
    /// A problem with a frame (an editor box or comment; frames never run).
    Frame { frame: String, message: String },
    /// An error in an expression kernel's body, at one of its expression nodes.
    Expr {
        node: String,
        expr_node: String,
        port: Option<String>,
        message: String,
    },
}

impl GraphError {
    pub fn node(&self) -> Option<&str> {
        match self {
            GraphError::Node { node, .. }
            | GraphError::Param { node, .. }
            | GraphError::Port { node, .. }
            | GraphError::Code { node, .. }
            | GraphError::Expr { node, .. } => Some(node),
            _ => None,
        }
    }
    pub fn node_msg(node: &str, message: impl Into<String>) -> Self {
        GraphError::Node {
            node: node.to_string(),
            message: message.into(),
        }
    }
    pub fn param(node: &str, param: &str, message: impl Into<String>) -> Self {
        GraphError::Param {
            node: node.to_string(),
            param: param.to_string(),
            message: message.into(),
        }
    }
    /// An error about kernel scalar `name` of `node`: the same words from
    /// the builder, `--set`, the app and `Simulation::set_param`.
    pub fn scalar(node: &str, name: &str, message: impl std::fmt::Display) -> Self {
        GraphError::param(node, "scalars", format!("scalar '{}': {}", name, message))
    }
    pub fn port(node: &str, port: &str, message: impl Into<String>) -> Self {
        GraphError::Port {
            node: node.to_string(),
            port: port.to_string(),
            message: message.into(),
        }
    }
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphError::Syntax { line, col, message } => {
                write!(f, "invalid JSON at line {}:{}: {}", line, col, message)
            }
            GraphError::Document { message } => write!(f, "{}", message),
            GraphError::Frame { frame, message } => write!(f, "frame '{}': {}", frame, message),
            GraphError::Node { node, message } => write!(f, "node '{}': {}", node, message),
            GraphError::Param {
                node,
                param,
                message,
            } => write!(f, "node '{}', param '{}': {}", node, param, message),
            GraphError::Port {
                node,
                port,
                message,
            } => write!(f, "node '{}', port '{}': {}", node, port, message),
            GraphError::Code {
                node,
                line,
                col,
                message,
            } => write!(f, "node '{}', code {}:{}: {}", node, line, col, message),
            GraphError::Expr {
                node,
                expr_node,
                port: Some(p),
                message,
            } => {
                write!(
                    f,
                    "node '{}', expression node '{}', input '{}': {}",
                    node, expr_node, p, message
                )
            }
            GraphError::Expr {
                node,
                expr_node,
                port: None,
                message,
            } => {
                write!(
                    f,
                    "node '{}', expression node '{}': {}",
                    node, expr_node, message
                )
            }
        }
    }
}

impl std::error::Error for GraphError {}

/// All problems found in one graph, in the order found.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphErrors(pub Vec<GraphError>);

impl fmt::Display for GraphErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", e)?;
        }
        Ok(())
    }
}

impl std::error::Error for GraphErrors {}

impl From<GraphError> for GraphErrors {
    fn from(e: GraphError) -> Self {
        GraphErrors(vec![e])
    }
}
