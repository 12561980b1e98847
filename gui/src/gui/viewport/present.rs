//! Presenting: views drawn by their kernels on the simulation's backend,
//! then handed to egui as textures (on the window's GPU) or pictures.

use super::*;

impl Viewport {
    /// Whether the running simulation is on a GPU backend (its state lives
    /// in device memory).
    pub fn on_gpu_backend(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| matches!(r.backend_name, "wgpu" | "cuda"))
    }

    pub(super) fn draws_on_gpu(&self, sim: &Simulation) -> bool {
        sim.engine().views_on_device() && self.gpu.is_some() && self.egui_renderer.is_some()
    }

    /// Draws the views here (the simulation is home): after an edit that
    /// changes only what is drawn, a reset, a new build.
    pub(super) fn draw(&mut self, ctx: &egui::Context) {
        self.needs_draw = false;
        let Some(sim) = self.sim.as_mut() else { return };
        let on_gpu =
            self.gpu.is_some() && self.egui_renderer.is_some() && sim.engine().views_on_device();
        match sim_worker::draw(sim, on_gpu) {
            Ok(d) => self.present(ctx, d),
            Err(e) => self.error = Some(e.to_string()),
        }
    }

    /// Puts drawn views on screen: GPU pictures are copied from their
    /// buffers into textures on the device; read-back ones are uploaded.
    pub(super) fn present(&mut self, ctx: &egui::Context, drawn: Drawn) {
        let Some(sim) = self.sim.as_ref() else { return };
        match drawn {
            Drawn::OnGpu => {
                let (Some(gpu), Some(egui_renderer)) = (&self.gpu, &self.egui_renderer) else {
                    return;
                };
                let engine = sim.engine();
                let mut enc = gpu
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("viewport"),
                    });
                for (i, v) in sim.program.view_kernels.iter().enumerate() {
                    let (w, h) = (v.width, v.height);
                    if self.textures.len() <= i {
                        let texture = gpu.device.create_texture(&wgpu::TextureDescriptor {
                            label: Some(&v.node_id),
                            size: wgpu::Extent3d {
                                width: w,
                                height: h,
                                depth_or_array_layers: 1,
                            },
                            mip_level_count: 1,
                            sample_count: 1,
                            dimension: wgpu::TextureDimension::D2,
                            format: wgpu::TextureFormat::Rgba8Unorm,
                            usage: wgpu::TextureUsages::TEXTURE_BINDING
                                | wgpu::TextureUsages::COPY_DST,
                            view_formats: &[],
                        });
                        let view = texture.create_view(&Default::default());
                        // One texture, two samplers: panes pick per pass.
                        let mut r = egui_renderer.write();
                        let id = r.register_native_texture(
                            &gpu.device,
                            &view,
                            wgpu::FilterMode::Nearest,
                        );
                        let linear =
                            r.register_native_texture(&gpu.device, &view, wgpu::FilterMode::Linear);
                        self.textures.push(ViewTexture {
                            id,
                            linear: Some(linear),
                            texture: Some(texture),
                            handle: None,
                            linear_handle: None,
                            image: None,
                            size: [w, h],
                            name: v.node_id.clone(),
                        });
                    }
                    let Some(tex) = self.textures[i].texture.as_ref() else {
                        continue;
                    };
                    let root = weft_ir::ir::layout::root_of(
                        &sim.program,
                        sim.program.fields[v.image].layout,
                    );
                    let Some(buffer) = engine.device_buffer(root) else {
                        continue;
                    };
                    // The image field is the whole of its root buffer, rows
                    // padded to 64 pixels = 256 bytes, the copy's row alignment.
                    enc.copy_buffer_to_texture(
                        wgpu::TexelCopyBufferInfo {
                            buffer,
                            layout: wgpu::TexelCopyBufferLayout {
                                offset: 0,
                                bytes_per_row: Some(v.pitch * 4),
                                rows_per_image: Some(h),
                            },
                        },
                        tex.as_image_copy(),
                        wgpu::Extent3d {
                            width: w,
                            height: h,
                            depth_or_array_layers: 1,
                        },
                    );
                }
                gpu.queue.submit([enc.finish()]);
            }
            Drawn::Reading(p) => {
                self.pictures = Some(p);
                ctx.request_repaint();
            }
            Drawn::Images(images) => {
                for (i, (name, img)) in images.into_iter().enumerate() {
                    let color = Arc::new(egui::ColorImage::from_rgba_unmultiplied(
                        [img.width as usize, img.height as usize],
                        &img.rgba,
                    ));
                    if self.textures.len() <= i {
                        let handle = ctx.load_texture(
                            format!("view {}", name),
                            color.clone(),
                            egui::TextureOptions::NEAREST,
                        );
                        self.textures.push(ViewTexture {
                            id: handle.id(),
                            linear: None,
                            texture: None,
                            handle: Some(handle),
                            linear_handle: None,
                            image: Some(color),
                            size: [img.width, img.height],
                            name,
                        });
                    } else {
                        let t = &mut self.textures[i];
                        if let Some(h) = &mut t.handle {
                            h.set(color.clone(), egui::TextureOptions::NEAREST);
                        }
                        if let Some(h) = &mut t.linear_handle {
                            h.set(color.clone(), egui::TextureOptions::LINEAR);
                        }
                        t.size = [img.width, img.height];
                        t.image = Some(color);
                    }
                }
            }
        }
    }

    /// The linearly sampled texture of view `k` (for a minified picture),
    /// made from its last picture on first use on the CPU path.
    pub(super) fn linear_texture(&mut self, ctx: &egui::Context, k: usize) -> egui::TextureId {
        let t = &mut self.textures[k];
        if let Some(id) = t.linear {
            return id;
        }
        let Some(image) = t.image.clone() else {
            return t.id;
        };
        let h = ctx.load_texture(
            format!("view {} linear", t.name),
            image,
            egui::TextureOptions::LINEAR,
        );
        t.linear = Some(h.id());
        t.linear_handle = Some(h);
        t.linear.unwrap_or(t.id)
    }

    /// Drops the views' textures (a new build draws others): the GPU
    /// path's registrations are freed from egui's renderer, which keeps
    /// them otherwise (egui frees its own CPU textures with their handles).
    pub(super) fn clear_textures(&mut self) {
        for t in self.textures.drain(..) {
            if let (Some(_), Some(r)) = (&t.texture, &self.egui_renderer) {
                let mut r = r.write();
                r.free_texture(&t.id);
                if let Some(l) = t.linear {
                    r.free_texture(&l);
                }
            }
        }
    }
}
