//! The translation unit the host compiler builds for one kernel: the prelude (host branch), the
//! kernel's source with its own file name and line numbers, and the entry points the simulator
//! loads (`gm_sim_abi`, `gm_sim_init`, `gm_sim_params`, `gm_sim_run`).

/// `true` for a C identifier (the entry's name is pasted into generated code).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The file name compile errors and divergence reports show: `<kernel>.cu`.
pub(crate) fn file_name(kernel: &str) -> String {
    let clean: String = kernel
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}.cu")
}

/// The whole translation unit; `entry` must be an identifier ([`is_identifier`]).
pub(crate) fn translation_unit(kernel: &str, code: &str, entry: &str) -> String {
    let file = file_name(kernel);
    format!(
        "#include \"gpu_mem.h\"\n\
         #line 1 \"{file}\"\n\
         {code}\n\
         #line 1 \"gpu-mem-sim-entry.cpp\"\n\
         GM_SIM_EXPORT unsigned int gm_sim_abi() {{ return GM_SIM_ABI; }}\n\
         GM_SIM_EXPORT void gm_sim_init(const gm_sim_runtime* rt) {{ gm_sim_rt = *rt; }}\n\
         GM_SIM_EXPORT const gm_sim_param* gm_sim_params(int* count) {{\n\
         \x20   return gm_sim_describe(&{entry}, count);\n\
         }}\n\
         GM_SIM_EXPORT int gm_sim_run(void* const* args) {{ return gm_sim_invoke(&{entry}, args); }}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert!(is_identifier("matmul_tiled"));
        assert!(is_identifier("_k2"));
        assert!(!is_identifier("2k"));
        assert!(!is_identifier("k(); evil"));
        assert!(!is_identifier(""));
    }

    #[test]
    fn the_kernel_keeps_its_line_numbers() {
        let tu = translation_unit("scale", "line one\nline two", "scale");
        let lines: Vec<&str> = tu.lines().collect();
        assert_eq!(lines[1], "#line 1 \"scale.cu\"");
        assert_eq!(lines[2], "line one");
        assert!(tu.contains("gm_sim_invoke(&scale, args)"));
        assert_eq!(file_name("we\"ird name"), "we_ird_name.cu");
    }
}
