"""The MGPU twins of ComfyUI's official LTX-2.3 templates (example_workflows/make_workflows.py writes them).

Each is the official template's graph (comfyui-workflow-templates-json 0.1.123, its subgraph flattened;
the same nodes, values, seeds, schedules and guiders) with the heavy nodes ours: the MGPU Loader's MODEL
into the template's own guiders and samplers (the LoRA the template puts on the checkpoint fused by the
loader; its MODEL carries the LoRA file's metadata, which GetICLoRAParameters reads for the IC-LoRA),
MGPU Text Encode for CLIPTextEncode, Distributed VAE Decode (tiled, the template's tile settings) for
VAEDecodeTiled. The template's own loaders stay where other nodes need them (its VAE for the image
guides and the latent upscaler, its Gemma for the prompt enhancer). tests/test_official_templates.py
checks each twin node for node against the downloaded template and runs it on the tiny files.
The graphs, prompts and settings come from those templates (Comfy Org, MIT licence).
"""

from __future__ import annotations

from workflow_graph import Graph

_TWIN = (
    "The MGPU twin of ComfyUI's {template} template ({what}): the template's own graph and settings, with "
    "the MGPU Loader's MODEL{lora} in its guiders and samplers, MGPU Text Encode for the prompts and "
    "Distributed VAE Decode on all GPUs."
)
DESCRIPTIONS = {
    name: _TWIN.format(template=name, what=what, lora=lora)
    for name, what, lora in (
        ("video_ltx2_3_t2v", "LTX-2.3 text-to-video, two stages", " (distilled LoRA 0.5 fused)"),
        ("video_ltx2_3_i2v", "LTX-2.3 image-to-video, two stages", " (distilled LoRA 0.5 fused)"),
        ("video_ltx2_3_ia2v", "LTX-2.3 image + audio to video", " (distilled LoRA 0.5 fused)"),
        ("video_ltx2_3_flf2v", "LTX-2.3 first and last frame to video, distilled checkpoint", ""),
        ("video_ltx2_3_ic_lora", "LTX-2.3 IC-LoRA union control from a MoGe depth video; needs the MoGe "
         "depth model", " (IC-LoRA fused)"),
        ("video_ltx2_3_id_lora", "LTX-2.3 ID-LoRA: a reference voice and image", " (distilled LoRA fused)"),
        ("video_ltx2_5_t2v", "LTX-2.5 text-to-video, two stages, split files", ""),
        ("video_ltx2_5_i2v", "LTX-2.5 image-to-video, two stages, split files", ""),
        ("video_ltx2_5_flf2v", "LTX-2.5 first and last frame to video, split files", ""),
    )
}  # fmt: skip


def template_23_t2v() -> Graph:
    g = Graph("ltx2_3_mgpu_t2v", DESCRIPTIONS["video_ltx2_3_t2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
            "lora_strength": 0.5,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (1660, 3660),
    )
    random_noise_2 = g.add("RandomNoise", {"noise_seed": 42}, (4720, 3750))
    random_noise_3 = g.add("RandomNoise", {"noise_seed": 810138461690240}, (3200, 3900))
    ltxv_audio_vae_loader_4 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (1660, 4140)
    )
    ksampler_select_5 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (4720, 4160))
    manual_sigmas_6 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (4720, 4340))
    ksampler_select_7 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (3200, 4350))
    primitive_int_8 = g.add("PrimitiveInt", {"value": 720}, (1160, 4530), "Height")
    comfy_math_expression_9 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2530, 5130), **{"values.a": (primitive_int_8, 0)}
    )
    primitive_int_10 = g.add("PrimitiveInt", {"value": 25}, (1160, 4680), "Frame Rate")
    comfy_math_expression_11 = g.add(
        "ComfyMathExpression",
        {"expression": "a"},
        (2530, 5270),
        "Math Expression (fps)",
        **{"values.a": (primitive_int_10, 0)},
    )
    primitive_int_12 = g.add("PrimitiveInt", {"value": 5}, (1160, 4230), "Duration")
    primitive_boolean_13 = g.add(
        "PrimitiveBoolean", {"value": True}, (1170, 4080), "Switch to Text to Video?"
    )
    manual_sigmas_14 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (3200, 4550),
    )
    latent_upscale_model_loader_15 = g.add(
        "LatentUpscaleModelLoader",
        {"model_name": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"},
        (1670, 4600),
    )
    primitive_int_16 = g.add("PrimitiveInt", {"value": 1280}, (1160, 4380), "Width")
    comfy_math_expression_17 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2530, 5070), **{"values.a": (primitive_int_16, 0)}
    )
    mgpu_text_encode_18 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (2180, 4480),
        mgpu_model=(mgpu_loader_1, 0),
    )
    checkpoint_loader_simple_19 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (1660, 3660)
    )
    ltxav_text_encoder_loader_20 = g.add(
        "LTXAVTextEncoderLoader",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "device": "default",
        },
        (1660, 4340),
    )
    primitive_string_multiline_21 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "Dynamic cinematic close-up of high-tech modular machinery self-assembling in midair, precision robotic parts, magnetic connectors, and glowing circuits clicking together, subtle smoke and light flares, extremely detailed titanium textures. The final product displays a clean, clear surface with large glowing engraved text “LTX-2.3” centered and unobstructed, dramatic lighting, photorealism, 8K, sharp focus.\n"
        },
        (1160, 3680),
        "Prompt",
    )
    comfy_math_expression_22 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (2540, 5370),
        "Math Expression (length)",
        **{"values.a": (primitive_int_12, 0), "values.b": (primitive_int_10, 0)},
    )
    empty_ltxv_latent_video_23 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2980, 5200),
        width=(comfy_math_expression_17, 1),
        height=(comfy_math_expression_9, 1),
        length=(comfy_math_expression_22, 1),
    )
    ltxv_empty_latent_audio_24 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (2970, 4970),
        frames_number=(comfy_math_expression_22, 1),
        frame_rate=(comfy_math_expression_11, 1),
        audio_vae=(ltxv_audio_vae_loader_4, 0),
    )
    empty_image_25 = g.add(
        "EmptyImage", {"width": 512, "height": 512, "batch_size": 1, "color": 0}, (1170, 5030)
    )
    resize_image_mask_node_26 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 1920,
            "resize_type.height": 1088,
            "resize_type.crop": "center",
            "scale_method": "lanczos",
        },
        (1670, 5040),
        **{
            "resize_type.width": (primitive_int_16, 0),
            "resize_type.height": (primitive_int_8, 0),
            "input": (empty_image_25, 0),
        },
    )
    lora_loader_27 = g.add(
        "LoraLoader",
        {
            "lora_name": "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors",
            "strength_model": 1,
            "strength_clip": 1,
        },
        (1150, 2880),
        model=(mgpu_loader_1, 1),
        clip=(ltxav_text_encoder_loader_20, 0),
    )
    text_generate_ltx2_prompt_28 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 2048,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.05,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (1580, 2880),
        prompt=(primitive_string_multiline_21, 0),
        clip=(lora_loader_27, 1),
    )
    primitive_boolean_29 = g.add(
        "PrimitiveBoolean", {"value": True}, (1150, 3360), "Boolean (Enable Prompt Enhance)"
    )
    comfy_switch_node_30 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (2110, 3290),
        switch=(primitive_boolean_29, 0),
        on_false=(primitive_string_multiline_21, 0),
        on_true=(text_generate_ltx2_prompt_28, 0),
    )
    mgpu_text_encode_31 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (2170, 3640),
        mgpu_model=(mgpu_loader_1, 0),
        text=(comfy_switch_node_30, 0),
    )
    ltxv_conditioning_32 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (2790, 3670),
        frame_rate=(comfy_math_expression_11, 0),
        positive=(mgpu_text_encode_31, 0),
        negative=(mgpu_text_encode_18, 0),
    )
    cfg_guider_33 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (3200, 4100),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_conditioning_32, 0),
        negative=(ltxv_conditioning_32, 1),
    )
    g.add("PreviewAny", {}, (2420, 2900), source=(comfy_switch_node_30, 0))
    resize_image_mask_node_35 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 512, "scale_method": "lanczos"},
        (2090, 5050),
        input=(resize_image_mask_node_26, 0),
    )
    ltxv_preprocess_36 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (2100, 5270), image=(resize_image_mask_node_35, 0)
    )
    ltxv_img_to_video_inplace_37 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (3420, 4990),
        bypass=(primitive_boolean_13, 0),
        vae=(checkpoint_loader_simple_19, 2),
        image=(ltxv_preprocess_36, 0),
        latent=(empty_ltxv_latent_video_23, 0),
    )
    concat_av_latent_38 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3820, 4990),
        video_latent=(ltxv_img_to_video_inplace_37, 0),
        audio_latent=(ltxv_empty_latent_audio_24, 0),
    )
    sampler_custom_advanced_39 = g.add(
        "SamplerCustomAdvanced",
        {},
        (3620, 3990),
        noise=(random_noise_3, 0),
        guider=(cfg_guider_33, 0),
        sampler=(ksampler_select_7, 0),
        sigmas=(manual_sigmas_14, 0),
        latent_image=(concat_av_latent_38, 0),
    )
    separate_av_latent_40 = g.add(
        "LTXVSeparateAVLatent", {}, (3890, 3910), av_latent=(sampler_custom_advanced_39, 0)
    )
    ltxv_crop_guides_41 = g.add(
        "LTXVCropGuides",
        {},
        (3900, 3700),
        positive=(ltxv_conditioning_32, 0),
        negative=(ltxv_conditioning_32, 1),
        latent=(separate_av_latent_40, 0),
    )
    cfg_guider_42 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (4720, 3930),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_crop_guides_41, 0),
        negative=(ltxv_crop_guides_41, 1),
    )
    ltxv_latent_upsampler_43 = g.add(
        "LTXVLatentUpsampler",
        {},
        (4270, 3910),
        samples=(separate_av_latent_40, 0),
        upscale_model=(latent_upscale_model_loader_15, 0),
        vae=(checkpoint_loader_simple_19, 2),
    )
    ltxv_img_to_video_inplace_44 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (4280, 4150),
        bypass=(primitive_boolean_13, 0),
        vae=(checkpoint_loader_simple_19, 2),
        image=(ltxv_preprocess_36, 0),
        latent=(ltxv_latent_upsampler_43, 0),
    )
    concat_av_latent_45 = g.add(
        "LTXVConcatAVLatent",
        {},
        (4730, 4520),
        video_latent=(ltxv_img_to_video_inplace_44, 0),
        audio_latent=(separate_av_latent_40, 1),
    )
    sampler_custom_advanced_46 = g.add(
        "SamplerCustomAdvanced",
        {},
        (5070, 3750),
        noise=(random_noise_2, 0),
        guider=(cfg_guider_42, 0),
        sampler=(ksampler_select_5, 0),
        sigmas=(manual_sigmas_6, 0),
        latent_image=(concat_av_latent_45, 0),
    )
    separate_av_latent_47 = g.add(
        "LTXVSeparateAVLatent", {}, (5410, 3750), av_latent=(sampler_custom_advanced_46, 0)
    )
    ltxv_audio_vae_decode_48 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (5770, 3940),
        samples=(separate_av_latent_47, 1),
        audio_vae=(ltxv_audio_vae_loader_4, 0),
    )
    distributed_vae_decode_49 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 4,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (5760, 3650),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(separate_av_latent_47, 0),
    )
    create_video_50 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (5740, 4610),
        fps=(comfy_math_expression_11, 0),
        images=(distributed_vae_decode_49, 0),
        audio=(ltxv_audio_vae_decode_48, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.3_t2v", "format": "auto", "codec": "auto"},
        (0, 3530),
        video=(create_video_50, 0),
    )
    return g


def template_23_i2v() -> Graph:
    g = Graph("ltx2_3_mgpu_i2v", DESCRIPTIONS["video_ltx2_3_i2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
            "lora_strength": 0.5,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (1660, 3660),
    )
    load_image_2 = g.add("LoadImage", {"image": "egyptian_queen.png"}, (-440, 3530))
    random_noise_3 = g.add("RandomNoise", {"noise_seed": 42}, (4700, 3650))
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 60540193790228}, (3160, 3630))
    ltxv_audio_vae_loader_5 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (1660, 4100)
    )
    ksampler_select_6 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (4700, 4100))
    manual_sigmas_7 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (4700, 4290))
    ksampler_select_8 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (3160, 4040))
    primitive_int_9 = g.add("PrimitiveInt", {"value": 720}, (1190, 4650), "Height")
    comfy_math_expression_10 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2550, 4890), **{"values.a": (primitive_int_9, 0)}
    )
    primitive_int_11 = g.add("PrimitiveInt", {"value": 25}, (1190, 4840), "Frame Rate")
    comfy_math_expression_12 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (2540, 5030), **{"values.a": (primitive_int_11, 0)}
    )
    primitive_int_13 = g.add("PrimitiveInt", {"value": 5}, (1190, 4280), "Duration")
    primitive_boolean_14 = g.add(
        "PrimitiveBoolean", {"value": False}, (1190, 4110), "Switch to Text to Video?"
    )
    manual_sigmas_15 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (3160, 4220),
    )
    latent_upscale_model_loader_16 = g.add(
        "LatentUpscaleModelLoader",
        {"model_name": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"},
        (1670, 4550),
    )
    primitive_int_17 = g.add("PrimitiveInt", {"value": 1280}, (1190, 4470), "Width")
    resize_image_mask_node_18 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 1920,
            "resize_type.height": 1088,
            "resize_type.crop": "center",
            "scale_method": "lanczos",
        },
        (1680, 4800),
        **{
            "resize_type.width": (primitive_int_17, 0),
            "resize_type.height": (primitive_int_9, 0),
            "input": (load_image_2, 0),
        },
    )
    comfy_math_expression_19 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2540, 4830), **{"values.a": (primitive_int_17, 0)}
    )
    mgpu_text_encode_20 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (2180, 4120),
        mgpu_model=(mgpu_loader_1, 0),
    )
    checkpoint_loader_simple_21 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (1660, 3660)
    )
    ltxav_text_encoder_loader_22 = g.add(
        "LTXAVTextEncoderLoader",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "device": "default",
        },
        (1660, 4280),
    )
    primitive_string_multiline_23 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "Egyptian royal in blue-and-gold headdress and high collar, white dress with golden embroidery and armbands, desert, robot soldiers in formation left and right. She walks steadily forward, head held level and gaze fixed ahead—no dipping or lowering of the head. The camera performs a single, smooth push-in only: starting in a wider shot of her, the robots, and the desert, it moves steadily forward until she is in a medium or medium-close frame, then holds. She stops, posture and head still upright, and says: “The old gods are silent. I am not.” Robot soldiers shift or march in place; sand and fabric move with the wind. No pull-back; the only camera move is the continuous push-in."
        },
        (1190, 3680),
        "Prompt",
    )
    comfy_math_expression_24 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (1210, 5040),
        "Math Expression (length)",
        **{"values.a": (primitive_int_13, 0), "values.b": (primitive_int_11, 0)},
    )
    empty_ltxv_latent_video_25 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2870, 4940),
        width=(comfy_math_expression_19, 1),
        height=(comfy_math_expression_10, 1),
        length=(comfy_math_expression_24, 1),
    )
    ltxv_empty_latent_audio_26 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (3540, 4960),
        frames_number=(comfy_math_expression_24, 1),
        frame_rate=(comfy_math_expression_12, 1),
        audio_vae=(ltxv_audio_vae_loader_5, 0),
    )
    lora_loader_27 = g.add(
        "LoraLoader",
        {
            "lora_name": "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors",
            "strength_model": 1,
            "strength_clip": 1,
        },
        (1200, 2870),
        model=(mgpu_loader_1, 1),
        clip=(ltxav_text_encoder_loader_22, 0),
    )
    primitive_boolean_28 = g.add(
        "PrimitiveBoolean", {"value": False}, (1200, 3350), "Boolean (Enable Prompt Enhance)"
    )
    resize_image_mask_node_29 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 1536, "scale_method": "area"},
        (2090, 4810),
        input=(resize_image_mask_node_18, 0),
    )
    ltxv_preprocess_30 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (2100, 5010), image=(resize_image_mask_node_29, 0)
    )
    ltxv_img_to_video_inplace_31 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (3230, 4810),
        bypass=(primitive_boolean_14, 0),
        vae=(checkpoint_loader_simple_21, 2),
        image=(ltxv_preprocess_30, 0),
        latent=(empty_ltxv_latent_video_25, 0),
    )
    concat_av_latent_32 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3860, 4830),
        video_latent=(ltxv_img_to_video_inplace_31, 0),
        audio_latent=(ltxv_empty_latent_audio_26, 0),
    )
    text_generate_ltx2_prompt_33 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 2048,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.05,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (1630, 2870),
        prompt=(primitive_string_multiline_23, 0),
        clip=(lora_loader_27, 1),
        image=(resize_image_mask_node_29, 0),
    )
    comfy_switch_node_34 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (2160, 3280),
        switch=(primitive_boolean_28, 0),
        on_false=(primitive_string_multiline_23, 0),
        on_true=(text_generate_ltx2_prompt_33, 0),
    )
    mgpu_text_encode_35 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (2170, 3640),
        mgpu_model=(mgpu_loader_1, 0),
        text=(comfy_switch_node_34, 0),
    )
    ltxv_conditioning_36 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (2800, 3810),
        frame_rate=(comfy_math_expression_12, 0),
        positive=(mgpu_text_encode_35, 0),
        negative=(mgpu_text_encode_20, 0),
    )
    cfg_guider_37 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (3160, 3810),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_conditioning_36, 0),
        negative=(ltxv_conditioning_36, 1),
    )
    sampler_custom_advanced_38 = g.add(
        "SamplerCustomAdvanced",
        {},
        (3550, 3630),
        noise=(random_noise_4, 0),
        guider=(cfg_guider_37, 0),
        sampler=(ksampler_select_8, 0),
        sigmas=(manual_sigmas_15, 0),
        latent_image=(concat_av_latent_32, 0),
    )
    separate_av_latent_39 = g.add(
        "LTXVSeparateAVLatent", {}, (3820, 3630), av_latent=(sampler_custom_advanced_38, 0)
    )
    ltxv_crop_guides_40 = g.add(
        "LTXVCropGuides",
        {},
        (3830, 3810),
        positive=(ltxv_conditioning_36, 0),
        negative=(ltxv_conditioning_36, 1),
        latent=(separate_av_latent_39, 0),
    )
    cfg_guider_41 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (4700, 3850),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_crop_guides_40, 0),
        negative=(ltxv_crop_guides_40, 1),
    )
    ltxv_latent_upsampler_42 = g.add(
        "LTXVLatentUpsampler",
        {},
        (4250, 3760),
        samples=(separate_av_latent_39, 0),
        upscale_model=(latent_upscale_model_loader_16, 0),
        vae=(checkpoint_loader_simple_21, 2),
    )
    ltxv_img_to_video_inplace_43 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (4230, 4100),
        bypass=(primitive_boolean_14, 0),
        vae=(checkpoint_loader_simple_21, 2),
        image=(ltxv_preprocess_30, 0),
        latent=(ltxv_latent_upsampler_42, 0),
    )
    concat_av_latent_44 = g.add(
        "LTXVConcatAVLatent",
        {},
        (4710, 4490),
        video_latent=(ltxv_img_to_video_inplace_43, 0),
        audio_latent=(separate_av_latent_39, 1),
    )
    sampler_custom_advanced_45 = g.add(
        "SamplerCustomAdvanced",
        {},
        (5050, 3650),
        noise=(random_noise_3, 0),
        guider=(cfg_guider_41, 0),
        sampler=(ksampler_select_6, 0),
        sigmas=(manual_sigmas_7, 0),
        latent_image=(concat_av_latent_44, 0),
    )
    separate_av_latent_46 = g.add(
        "LTXVSeparateAVLatent", {}, (5390, 3650), av_latent=(sampler_custom_advanced_45, 0)
    )
    ltxv_audio_vae_decode_47 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (5760, 3970),
        samples=(separate_av_latent_46, 1),
        audio_vae=(ltxv_audio_vae_loader_5, 0),
    )
    distributed_vae_decode_48 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 4,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (5750, 3610),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(separate_av_latent_46, 0),
    )
    create_video_49 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (6050, 4490),
        fps=(comfy_math_expression_12, 0),
        images=(distributed_vae_decode_48, 0),
        audio=(ltxv_audio_vae_decode_47, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.3_i2v", "format": "auto", "codec": "auto"},
        (430, 3530),
        video=(create_video_49, 0),
    )
    g.add("PreviewAny", {}, (2470, 2890), source=(comfy_switch_node_34, 0))
    return g


def template_23_ia2v() -> Graph:
    g = Graph("ltx2_3_mgpu_ia2v", DESCRIPTIONS["video_ltx2_3_ia2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
            "lora_strength": 0.5,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (870, 3410),
    )
    load_image_2 = g.add("LoadImage", {"image": "cactus_man.png"}, (-440, 3530))
    load_audio_3 = g.add("LoadAudio", {"audio": "ltx_23_audio.mp3"}, (-440, 4070))
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 42}, (3970, 3430))
    random_noise_5 = g.add("RandomNoise", {"noise_seed": 225158785956033}, (2330, 3420))
    ksampler_select_6 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (3970, 3790))
    manual_sigmas_7 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (3970, 3960))
    ksampler_select_8 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (2340, 3790))
    manual_sigmas_9 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (2340, 4000),
    )
    mgpu_text_encode_10 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1370, 3910),
        mgpu_model=(mgpu_loader_1, 0),
    )
    primitive_int_11 = g.add("PrimitiveInt", {"value": 1280}, (410, 4040), "Width")
    ltxv_audio_vae_loader_12 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (870, 3790)
    )
    primitive_boolean_13 = g.add(
        "PrimitiveBoolean", {"value": False}, (420, 3890), "Switch to Text to Video?"
    )
    comfy_math_expression_14 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (1760, 4620), **{"values.a": (primitive_int_11, 0)}
    )
    primitive_float_15 = g.add("PrimitiveFloat", {"value": 9}, (410, 4520), "Duration")
    primitive_int_16 = g.add("PrimitiveInt", {"value": 24}, (410, 4340), "Frame Rate")
    comfy_math_expression_17 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (1760, 4500), **{"values.a": (primitive_int_16, 0)}
    )
    comfy_math_expression_18 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (1760, 4720),
        **{"values.a": (primitive_float_15, 0), "values.b": (primitive_int_16, 0)},
    )
    primitive_int_19 = g.add("PrimitiveInt", {"value": 720}, (410, 4190), "Height")
    solid_mask_20 = g.add(
        "SolidMask",
        {"value": 0, "width": 1024, "height": 1024},
        (2390, 4420),
        width=(primitive_int_11, 0),
        height=(primitive_int_19, 0),
    )
    comfy_math_expression_21 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (1760, 4670), **{"values.a": (primitive_int_19, 0)}
    )
    empty_ltxv_latent_video_22 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2070, 4590),
        width=(comfy_math_expression_14, 1),
        height=(comfy_math_expression_21, 1),
        length=(comfy_math_expression_18, 1),
    )
    trim_audio_duration_23 = g.add(
        "TrimAudioDuration",
        {"start_index": 0, "duration": 60},
        (410, 4810),
        duration=(primitive_float_15, 0),
        audio=(load_audio_3, 0),
    )
    ltxv_audio_vae_encode_24 = g.add(
        "LTXVAudioVAEEncode",
        {},
        (2400, 4640),
        audio=(trim_audio_duration_23, 0),
        audio_vae=(ltxv_audio_vae_loader_12, 0),
    )
    set_latent_noise_mask_25 = g.add(
        "SetLatentNoiseMask",
        {},
        (2720, 4640),
        samples=(ltxv_audio_vae_encode_24, 0),
        mask=(solid_mask_20, 0),
    )
    latent_upscale_model_loader_26 = g.add(
        "LatentUpscaleModelLoader", {"model_name": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"}, (880, 4160)
    )
    checkpoint_loader_simple_27 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (870, 3410)
    )
    ltxav_text_encoder_loader_28 = g.add(
        "LTXAVTextEncoderLoader",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "device": "default",
        },
        (870, 3950),
    )
    primitive_string_multiline_29 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "The fuzzy cactus creature is talking to the viewer as it grips the steering wheel with one hand, the other hand gestures naturally as it speaks. The car is moving, revealing the sunlit coastal background, static camera fixed on character, smooth side-tracking shot matching the car speed\n\nscene: Sunlit coastal road trip, clear coastal background\ncharacter: Fuzzy cactus creature with big square sunglasses and a Hawaiian shirt\naction: One hand grips the steering wheel, the other gestures naturally while talking to the camera\ncamera: Fixed on character, smooth side-tracking shot matching car speed"
        },
        (410, 3460),
        "Prompt",
    )
    resize_image_mask_node_30 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 1920,
            "resize_type.height": 1088,
            "resize_type.crop": "center",
            "scale_method": "lanczos",
        },
        (890, 4400),
        **{
            "resize_type.width": (primitive_int_11, 0),
            "resize_type.height": (primitive_int_19, 0),
            "input": (load_image_2, 0),
        },
    )
    lora_loader_31 = g.add(
        "LoraLoader",
        {
            "lora_name": "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors",
            "strength_model": 1,
            "strength_clip": 1,
        },
        (410, 2670),
        model=(mgpu_loader_1, 1),
        clip=(ltxav_text_encoder_loader_28, 0),
    )
    text_generate_ltx2_prompt_32 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 2048,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.05,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (840, 2670),
        prompt=(primitive_string_multiline_29, 0),
        clip=(lora_loader_31, 1),
    )
    primitive_boolean_33 = g.add(
        "PrimitiveBoolean", {"value": True}, (410, 3150), "Boolean (Enable Prompt Enhance)"
    )
    comfy_switch_node_34 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1370, 3080),
        switch=(primitive_boolean_33, 0),
        on_false=(primitive_string_multiline_29, 0),
        on_true=(text_generate_ltx2_prompt_32, 0),
    )
    mgpu_text_encode_35 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1370, 3430),
        mgpu_model=(mgpu_loader_1, 0),
        text=(comfy_switch_node_34, 0),
    )
    ltxv_conditioning_36 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (2000, 3600),
        frame_rate=(comfy_math_expression_17, 0),
        positive=(mgpu_text_encode_35, 0),
        negative=(mgpu_text_encode_10, 0),
    )
    cfg_guider_37 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (2330, 3580),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_conditioning_36, 0),
        negative=(ltxv_conditioning_36, 1),
    )
    g.add("PreviewAny", {}, (1680, 2690), source=(comfy_switch_node_34, 0))
    resize_image_mask_node_39 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 1536, "scale_method": "lanczos"},
        (1350, 4570),
        input=(resize_image_mask_node_30, 0),
    )
    ltxv_preprocess_40 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (1350, 4410), image=(resize_image_mask_node_39, 0)
    )
    ltxv_img_to_video_inplace_41 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (2060, 4410),
        bypass=(primitive_boolean_13, 0),
        vae=(checkpoint_loader_simple_27, 2),
        image=(ltxv_preprocess_40, 0),
        latent=(empty_ltxv_latent_video_22, 0),
    )
    concat_av_latent_42 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3090, 4420),
        video_latent=(ltxv_img_to_video_inplace_41, 0),
        audio_latent=(set_latent_noise_mask_25, 0),
    )
    sampler_custom_advanced_43 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2730, 3420),
        noise=(random_noise_5, 0),
        guider=(cfg_guider_37, 0),
        sampler=(ksampler_select_8, 0),
        sigmas=(manual_sigmas_9, 0),
        latent_image=(concat_av_latent_42, 0),
    )
    separate_av_latent_44 = g.add(
        "LTXVSeparateAVLatent", {}, (3070, 3430), av_latent=(sampler_custom_advanced_43, 0)
    )
    ltxv_crop_guides_45 = g.add(
        "LTXVCropGuides",
        {},
        (3070, 3610),
        positive=(ltxv_conditioning_36, 0),
        negative=(ltxv_conditioning_36, 1),
        latent=(separate_av_latent_44, 0),
    )
    cfg_guider_46 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (3970, 3580),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_crop_guides_45, 0),
        negative=(ltxv_crop_guides_45, 1),
    )
    ltxv_latent_upsampler_47 = g.add(
        "LTXVLatentUpsampler",
        {},
        (3500, 3710),
        samples=(separate_av_latent_44, 0),
        upscale_model=(latent_upscale_model_loader_26, 0),
        vae=(checkpoint_loader_simple_27, 2),
    )
    ltxv_img_to_video_inplace_48 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (3520, 3870),
        bypass=(primitive_boolean_13, 0),
        vae=(checkpoint_loader_simple_27, 2),
        image=(ltxv_preprocess_40, 0),
        latent=(ltxv_latent_upsampler_47, 0),
    )
    concat_av_latent_49 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3970, 4130),
        video_latent=(ltxv_img_to_video_inplace_48, 0),
        audio_latent=(separate_av_latent_44, 1),
    )
    sampler_custom_advanced_50 = g.add(
        "SamplerCustomAdvanced",
        {},
        (4310, 3440),
        noise=(random_noise_4, 0),
        guider=(cfg_guider_46, 0),
        sampler=(ksampler_select_6, 0),
        sigmas=(manual_sigmas_7, 0),
        latent_image=(concat_av_latent_49, 0),
    )
    separate_av_latent_51 = g.add(
        "LTXVSeparateAVLatent", {}, (4650, 3440), av_latent=(sampler_custom_advanced_50, 0)
    )
    ltxv_audio_vae_decode_52 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (4990, 3660),
        samples=(separate_av_latent_51, 1),
        audio_vae=(ltxv_audio_vae_loader_12, 0),
    )
    distributed_vae_decode_53 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 4,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (4970, 3440),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(separate_av_latent_51, 0),
    )
    create_video_54 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (4990, 4310),
        fps=(comfy_math_expression_17, 0),
        images=(distributed_vae_decode_53, 0),
        audio=(ltxv_audio_vae_decode_52, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.3_ia2v", "format": "auto", "codec": "auto"},
        (430, 3530),
        video=(create_video_54, 0),
    )
    return g


def template_23_flf2v() -> Graph:
    g = Graph("ltx2_3_mgpu_flf2v", DESCRIPTIONS["video_ltx2_3_flf2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (769, 2379),
    )
    load_image_2 = g.add("LoadImage", {"image": "low_view_classic_car.png"}, (0, 2889), "Load Last Frame")
    load_image_3 = g.add("LoadImage", {"image": "high_view_classic_car.png"}, (0, 2250), "Load First Frame")
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 315253765879496}, (1989, 2319))
    primitive_int_5 = g.add("PrimitiveInt", {"value": 5}, (760, 3650), "Duration")
    primitive_int_6 = g.add("PrimitiveInt", {"value": 25}, (760, 3800), "Frame Rate(int)")
    sampler_euler_ancestral_7 = g.add("SamplerEulerAncestral", {"eta": 0, "s_noise": 1}, (1989, 2719))
    manual_sigmas_8 = g.add(
        "ManualSigmas",
        {"sigmas": "1., 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (1989, 2909),
    )
    comfy_math_expression_9 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (760, 3970), **{"values.a": (primitive_int_6, 0)}
    )
    primitive_int_10 = g.add("PrimitiveInt", {"value": 1280}, (760, 3340), "Width")
    primitive_int_11 = g.add("PrimitiveInt", {"value": 720}, (760, 3490), "height")
    resize_image_mask_node_12 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 640,
            "resize_type.height": 360,
            "resize_type.crop": "center",
            "scale_method": "nearest-exact",
        },
        (1129, 3339),
        **{
            "resize_type.width": (primitive_int_10, 0),
            "resize_type.height": (primitive_int_11, 0),
            "input": (load_image_3, 0),
        },
    )
    ltxv_preprocess_13 = g.add(
        "LTXVPreprocess", {"img_compression": 25}, (1479, 3339), image=(resize_image_mask_node_12, 0)
    )
    get_image_size_14 = g.add("GetImageSize", {}, (1479, 3499), image=(resize_image_mask_node_12, 0))
    resize_image_mask_node_15 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 640,
            "resize_type.height": 360,
            "resize_type.crop": "center",
            "scale_method": "nearest-exact",
        },
        (1129, 3779),
        **{
            "resize_type.width": (primitive_int_10, 0),
            "resize_type.height": (primitive_int_11, 0),
            "input": (load_image_2, 0),
        },
    )
    ltxv_preprocess_16 = g.add(
        "LTXVPreprocess", {"img_compression": 25}, (1479, 3779), image=(resize_image_mask_node_15, 0)
    )
    mgpu_text_encode_17 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, wrong hand count, artifacts around text, unreadable text on shirt or hat, incorrect lettering on cap (“PNTR”), incorrect t-shirt slogan (“JUST DO IT”), missing microphone, misplaced microphone, inconsistent perspective, camera shake, incorrect depth of field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, smiling, laughing, exaggerated sadness, wrong gaze direction, eyes looking at camera, mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, off-sync audio, missing sniff sounds, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, missing door or shelves, missing shallow depth of field, flat lighting, inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts.",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1319, 2869),
        mgpu_model=(mgpu_loader_1, 0),
    )
    mgpu_text_encode_18 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "The camera move from a high position to a low position, keeping the character in the frame centered.\nMusic: Synthwave cyberpunk music with calm ambient synths and driving 80s beats.",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1309, 2379),
        mgpu_model=(mgpu_loader_1, 0),
    )
    ltxv_conditioning_19 = g.add(
        "LTXVConditioning",
        {"frame_rate": 25},
        (2089, 3399),
        frame_rate=(comfy_math_expression_9, 0),
        positive=(mgpu_text_encode_18, 0),
        negative=(mgpu_text_encode_17, 0),
    )
    checkpoint_loader_simple_20 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors"}, (769, 2379)
    )
    ltxv_audio_vae_loader_21 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors"}, (769, 2659)
    )
    comfy_math_expression_22 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (760, 4020),
        **{"values.a": (primitive_int_5, 0), "values.b": (primitive_int_6, 0)},
    )
    ltxv_empty_latent_audio_23 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (2089, 3819),
        frames_number=(comfy_math_expression_22, 1),
        frame_rate=(primitive_int_6, 0),
        audio_vae=(ltxv_audio_vae_loader_21, 0),
    )
    empty_ltxv_latent_video_24 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2089, 3579),
        width=(get_image_size_14, 0),
        height=(get_image_size_14, 1),
        length=(comfy_math_expression_22, 1),
    )
    ltxv_add_guide_25 = g.add(
        "LTXVAddGuide",
        {"frame_idx": 0, "strength": 0.7},
        (2749, 3429),
        positive=(ltxv_conditioning_19, 0),
        negative=(ltxv_conditioning_19, 1),
        vae=(checkpoint_loader_simple_20, 2),
        latent=(empty_ltxv_latent_video_24, 0),
        image=(ltxv_preprocess_13, 0),
    )
    ltxv_add_guide_26 = g.add(
        "LTXVAddGuide",
        {"frame_idx": -1, "strength": 0.7},
        (2749, 3699),
        positive=(ltxv_add_guide_25, 0),
        negative=(ltxv_add_guide_25, 1),
        vae=(checkpoint_loader_simple_20, 2),
        latent=(ltxv_add_guide_25, 2),
        image=(ltxv_preprocess_16, 0),
    )
    cfg_guider_27 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (1989, 2499),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_add_guide_26, 0),
        negative=(ltxv_add_guide_26, 1),
    )
    concat_av_latent_28 = g.add(
        "LTXVConcatAVLatent",
        {},
        (1989, 3089),
        video_latent=(ltxv_add_guide_26, 2),
        audio_latent=(ltxv_empty_latent_audio_23, 0),
    )
    sampler_custom_advanced_29 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2459, 2329),
        noise=(random_noise_4, 0),
        guider=(cfg_guider_27, 0),
        sampler=(sampler_euler_ancestral_7, 0),
        sigmas=(manual_sigmas_8, 0),
        latent_image=(concat_av_latent_28, 0),
    )
    separate_av_latent_30 = g.add(
        "LTXVSeparateAVLatent", {}, (2459, 2579), av_latent=(sampler_custom_advanced_29, 1)
    )
    ltxv_crop_guides_31 = g.add(
        "LTXVCropGuides",
        {},
        (2819, 2449),
        positive=(ltxv_add_guide_26, 0),
        negative=(ltxv_add_guide_26, 1),
        latent=(separate_av_latent_30, 0),
    )
    distributed_vae_decode_32 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 64,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (2819, 2629),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(ltxv_crop_guides_31, 2),
    )
    ltxv_audio_vae_decode_33 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (2819, 2919),
        samples=(separate_av_latent_30, 1),
        audio_vae=(ltxv_audio_vae_loader_21, 0),
    )
    create_video_34 = g.add(
        "CreateVideo",
        {"fps": 24},
        (3279, 2319),
        fps=(comfy_math_expression_9, 0),
        images=(distributed_vae_decode_32, 0),
        audio=(ltxv_audio_vae_decode_33, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/ltx2.3_flf2v", "format": "auto", "codec": "auto"},
        (1129, 2259),
        video=(create_video_34, 0),
    )
    return g


def template_23_ic_lora() -> Graph:
    g = Graph("ltx2_3_mgpu_ic_lora", DESCRIPTIONS["video_ltx2_3_ic_lora"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx-2.3-22b-ic-lora-union-control-ref0.5.safetensors",
            "lora_strength": 1,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (770, 2380),
    )
    primitive_int_2 = g.add("PrimitiveInt", {"value": 25}, (760, 3840), "Frame Rate(int)")
    comfy_math_expression_3 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (770, 4000), **{"values.a": (primitive_int_2, 0)}
    )
    primitive_int_4 = g.add("PrimitiveInt", {"value": 1280}, (760, 3340), "Width")
    primitive_int_5 = g.add("PrimitiveInt", {"value": 704}, (760, 3490), "height")
    mgpu_text_encode_6 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, wrong hand count, artifacts around text, unreadable text on shirt or hat, incorrect lettering on cap (“PNTR”), incorrect t-shirt slogan (“JUST DO IT”), missing microphone, misplaced microphone, inconsistent perspective, camera shake, incorrect depth of field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, smiling, laughing, exaggerated sadness, wrong gaze direction, eyes looking at camera, mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, off-sync audio, missing sniff sounds, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, missing door or shelves, missing shallow depth of field, flat lighting, inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts.",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1320, 2870),
        mgpu_model=(mgpu_loader_1, 0),
    )
    checkpoint_loader_simple_7 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors"}, (770, 2380)
    )
    ltxv_audio_vae_loader_8 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors"}, (770, 2590)
    )
    ltxav_text_encoder_loader_9 = g.add(
        "LTXAVTextEncoderLoader",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors",
            "device": "default",
        },
        (770, 2750),
    )
    get_iclora_parameters_10 = g.add("GetICLoRAParameters", {}, (1590, 3630), iclora_model=(mgpu_loader_1, 1))
    lora_loader_11 = g.add(
        "LoraLoader",
        {
            "lora_name": "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors",
            "strength_model": 1,
            "strength_clip": 1,
        },
        (770, 1570),
        model=(mgpu_loader_1, 1),
        clip=(ltxav_text_encoder_loader_9, 0),
    )
    primitive_boolean_12 = g.add(
        "PrimitiveBoolean", {"value": False}, (770, 2050), "Boolean (Enable Prompt Enhance)"
    )
    load_video_13 = g.add("LoadVideo", {"file": "stone_ruins.mp4"}, (-660, 3030))
    load_image_14 = g.add("LoadImage", {"image": "the_forgotten_gate.png"}, (-660, 2320))
    text_generate_ltx2_prompt_15 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "A slow forward dolly shot on a bright, sunlit day in a lush jungle ruin. A lone figure in nature-themed armor stands before a weathered stone arch overgrown with ivy. A textured marble sphere wrapped in twisting vines levitates in the arch’s center, spinning slowly. As the camera glides forward, vines sway softly, leaves flutter in the light breeze. Strong golden sunlight streams through the canopy, illuminating the mossy ruins with bright, clear light. The scene feels vibrant and peaceful, with subtle natural motion.",
            "max_length": 2048,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.05,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (1200, 1570),
        clip=(lora_loader_11, 1),
        image=(load_image_14, 0),
    )
    prompt_text_16 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "A slow forward dolly shot on a bright, sunlit day in a lush jungle ruin. A lone figure in nature-themed armor stands before a weathered stone arch overgrown with ivy. A textured marble sphere wrapped in twisting vines levitates in the arch’s center, spinning slowly. As the camera glides forward, vines sway softly, leaves flutter in the light breeze. Strong golden sunlight streams through the canopy, illuminating the mossy ruins with bright, clear light. The scene feels vibrant and peaceful, with subtle natural motion."
        },
        (1330, 1980),
        "Prompt",
    )
    comfy_switch_node_16 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1730, 1980),
        switch=(primitive_boolean_12, 0),
        on_true=(text_generate_ltx2_prompt_15, 0),
        on_false=(prompt_text_16, 0),
    )
    mgpu_text_encode_17 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1310, 2380),
        mgpu_model=(mgpu_loader_1, 0),
        text=(comfy_switch_node_16, 0),
    )
    ltxv_conditioning_18 = g.add(
        "LTXVConditioning",
        {"frame_rate": 25},
        (1180, 3350),
        frame_rate=(comfy_math_expression_3, 0),
        positive=(mgpu_text_encode_17, 0),
        negative=(mgpu_text_encode_6, 0),
    )
    g.add("PreviewAny", {}, (2040, 1590), source=(comfy_switch_node_16, 0))
    video_slice_20 = g.add(
        "Video Slice",
        {"start_time": 0, "duration": 5, "strict_duration": False},
        (-100, 3030),
        video=(load_video_13, 0),
    )
    load_moge_model_21 = g.add(
        "LoadMoGeModel", {"model_name": "moge_2_vitl_normal_fp16.safetensors"}, (-4180, 4880)
    )
    get_video_components_22 = g.add("GetVideoComponents", {}, (-4920, 5490), video=(video_slice_20, 0))
    get_image_size_23 = g.add("GetImageSize", {}, (-4980, 4910), image=(get_video_components_22, 0))
    comfy_math_expression_24 = g.add(
        "ComfyMathExpression",
        {"expression": "a > 2048"},
        (-4720, 4910),
        **{"values.a": (get_image_size_23, 0)},
    )
    resize_image_mask_node_25 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 2048, "scale_method": "area"},
        (-4600, 5250),
        input=(get_video_components_22, 0),
    )
    comfy_switch_node_26 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (-4180, 5060),
        switch=(comfy_math_expression_24, 2),
        on_false=(get_video_components_22, 0),
        on_true=(resize_image_mask_node_25, 0),
    )
    comfy_switch_node_27 = g.add(
        "ComfySwitchNode",
        {"switch": True},
        (-4160, 5340),
        on_false=(get_video_components_22, 0),
        on_true=(comfy_switch_node_26, 0),
    )
    moge_inference_28 = g.add(
        "MoGeInference",
        {
            "resolution_level": 9,
            "fov_x_degrees": 0,
            "batch_size": 4,
            "force_projection": True,
            "apply_mask": True,
        },
        (-3790, 5180),
        moge_model=(load_moge_model_21, 0),
        image=(comfy_switch_node_27, 0),
    )
    moge_render_29 = g.add(
        "MoGeRender", {"output": "depth"}, (-3430, 5030), moge_geometry=(moge_inference_28, 0)
    )
    get_image_size_30 = g.add("GetImageSize", {}, (770, 3640), image=(moge_render_29, 0))
    ltxv_empty_latent_audio_31 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (1180, 3800),
        frames_number=(get_image_size_30, 2),
        frame_rate=(primitive_int_2, 0),
        audio_vae=(ltxv_audio_vae_loader_8, 0),
    )
    empty_ltxv_latent_video_32 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (1180, 3550),
        width=(primitive_int_4, 0),
        height=(primitive_int_5, 0),
        length=(get_image_size_30, 2),
    )
    ltxv_img_to_video_inplace_33 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (1590, 3380),
        vae=(checkpoint_loader_simple_7, 2),
        image=(load_image_14, 0),
        latent=(empty_ltxv_latent_video_32, 0),
    )
    ltxv_add_guide_34 = g.add(
        "LTXVAddGuide",
        {"frame_idx": 0, "strength": 1},
        (2030, 3360),
        positive=(ltxv_conditioning_18, 0),
        negative=(ltxv_conditioning_18, 1),
        vae=(checkpoint_loader_simple_7, 2),
        latent=(ltxv_img_to_video_inplace_33, 0),
        image=(moge_render_29, 0),
        iclora_parameters=(get_iclora_parameters_10, 0),
    )
    concat_av_latent_35 = g.add(
        "LTXVConcatAVLatent",
        {},
        (2030, 2390),
        video_latent=(ltxv_add_guide_34, 2),
        audio_latent=(ltxv_empty_latent_audio_31, 0),
    )
    ksampler_36 = g.add(
        "KSampler",
        {
            "seed": 0,
            "steps": 8,
            "cfg": 1,
            "sampler_name": "euler_ancestral",
            "scheduler": "linear_quadratic",
            "denoise": 1,
        },
        (2030, 2570),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_add_guide_34, 0),
        negative=(ltxv_add_guide_34, 1),
        latent_image=(concat_av_latent_35, 0),
    )
    separate_av_latent_37 = g.add("LTXVSeparateAVLatent", {}, (2040, 3010), av_latent=(ksampler_36, 0))
    ltxv_crop_guides_38 = g.add(
        "LTXVCropGuides",
        {},
        (2430, 2450),
        positive=(ltxv_add_guide_34, 0),
        negative=(ltxv_add_guide_34, 1),
        latent=(separate_av_latent_37, 0),
    )
    distributed_vae_decode_39 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 64,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (2430, 2630),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(ltxv_crop_guides_38, 2),
    )
    ltxv_audio_vae_decode_40 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (2430, 2920),
        samples=(separate_av_latent_37, 1),
        audio_vae=(ltxv_audio_vae_loader_8, 0),
    )
    create_video_41 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (2890, 2900),
        fps=(comfy_math_expression_3, 0),
        images=(distributed_vae_decode_39, 0),
        audio=(ltxv_audio_vae_decode_40, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/ltx2.3_ic_lora", "format": "auto", "codec": "auto"},
        (1150, 2300),
        video=(create_video_41, 0),
    )
    return g


def template_23_id_lora() -> Graph:
    g = Graph("ltx2_3_mgpu_id_lora", DESCRIPTIONS["video_ltx2_3_id_lora"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
            "lora_strength": 0.5,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (880, 3440),
    )
    load_image_2 = g.add("LoadImage", {"image": "vintage_thinker.png"}, (-440, 3530))
    load_audio_3 = g.add("LoadAudio", {"audio": "ltx23_reference_audio.mp3"}, (-440, 4070))
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 42}, (4230, 3420))
    random_noise_5 = g.add("RandomNoise", {"noise_seed": 597157848195547}, (2590, 3420))
    ksampler_select_6 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (4230, 3760))
    manual_sigmas_7 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (4240, 3900))
    ksampler_select_8 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (2600, 3800))
    manual_sigmas_9 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (2610, 4020),
    )
    mgpu_text_encode_10 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1400, 3910),
        mgpu_model=(mgpu_loader_1, 0),
    )
    primitive_int_11 = g.add("PrimitiveInt", {"value": 1280}, (410, 3890), "Width")
    ltxv_audio_vae_loader_12 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (890, 4110)
    )
    comfy_math_expression_13 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2310, 4490), **{"values.a": (primitive_int_11, 0)}
    )
    primitive_float_14 = g.add("PrimitiveFloat", {"value": 10}, (410, 4420), "Duration")
    primitive_int_15 = g.add("PrimitiveInt", {"value": 25}, (410, 4240), "Frame Rate")
    comfy_math_expression_16 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (2290, 4320), **{"values.a": (primitive_int_15, 0)}
    )
    comfy_math_expression_17 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (2310, 4590),
        **{"values.a": (primitive_float_14, 0), "values.b": (primitive_int_15, 0)},
    )
    primitive_int_18 = g.add("PrimitiveInt", {"value": 720}, (410, 4070), "Height")
    comfy_math_expression_19 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2310, 4540), **{"values.a": (primitive_int_18, 0)}
    )
    empty_ltxv_latent_video_20 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2600, 4510),
        width=(comfy_math_expression_13, 1),
        height=(comfy_math_expression_19, 1),
        length=(comfy_math_expression_17, 1),
    )
    latent_upscale_model_loader_21 = g.add(
        "LatentUpscaleModelLoader", {"model_name": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"}, (890, 4570)
    )
    checkpoint_loader_simple_22 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (880, 3440)
    )
    primitive_string_multiline_23 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "[VISUAL]: Opens with a medium shot, camera slowly pushes in toward the character. A man with short dark hair and round glasses, wearing a retro orange floral shirt, looks directly at the camera, his mouth opens and closes naturally as he speaks, tilts his head playfully.\n[SPEECH]: Hey, what do you think of this vibe? Feels like we’re back in the 90s.\n[SOUNDS]: Playful and upbeat tone, moderate volume, close to the microphone. "
        },
        (400, 3460),
        "Prompt",
    )
    mgpu_text_encode_24 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1400, 3430),
        mgpu_model=(mgpu_loader_1, 0),
        text=(primitive_string_multiline_23, 0),
    )
    resize_image_mask_node_25 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 1920,
            "resize_type.height": 1088,
            "resize_type.crop": "center",
            "scale_method": "lanczos",
        },
        (1430, 4300),
        **{
            "resize_type.width": (primitive_int_11, 0),
            "resize_type.height": (primitive_int_18, 0),
            "input": (load_image_2, 0),
        },
    )
    lora_loader_model_only_26 = g.add(
        "LoraLoaderModelOnly",
        {"lora_name": "ltx-2.3-id-lora-talkvid-3k.safetensors", "strength_model": 1},
        (880, 3870),
        model=(mgpu_loader_1, 1),
    )
    ltxv_empty_latent_audio_27 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (2930, 4520),
        frames_number=(comfy_math_expression_17, 1),
        frame_rate=(comfy_math_expression_16, 1),
        audio_vae=(ltxv_audio_vae_loader_12, 0),
    )
    ltxv_reference_audio_28 = g.add(
        "LTXVReferenceAudio",
        {"identity_guidance_scale": 3, "start_percent": 0, "end_percent": 1},
        (2170, 3560),
        model=(lora_loader_model_only_26, 0),
        positive=(mgpu_text_encode_24, 0),
        negative=(mgpu_text_encode_10, 0),
        reference_audio=(load_audio_3, 0),
        audio_vae=(ltxv_audio_vae_loader_12, 0),
    )
    ltxv_conditioning_29 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (2180, 3880),
        frame_rate=(comfy_math_expression_16, 0),
        positive=(ltxv_reference_audio_28, 1),
        negative=(ltxv_reference_audio_28, 2),
    )
    cfg_guider_30 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (2590, 3580),
        model=(ltxv_reference_audio_28, 0),
        positive=(ltxv_conditioning_29, 0),
        negative=(ltxv_conditioning_29, 1),
    )
    resize_image_mask_node_31 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 1536, "scale_method": "lanczos"},
        (1820, 4300),
        input=(resize_image_mask_node_25, 0),
    )
    ltxv_preprocess_32 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (1820, 4520), image=(resize_image_mask_node_31, 0)
    )
    ltxv_img_to_video_inplace_33 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (2600, 4290),
        vae=(checkpoint_loader_simple_22, 2),
        image=(ltxv_preprocess_32, 0),
        latent=(empty_ltxv_latent_video_20, 0),
    )
    concat_av_latent_34 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3340, 4280),
        video_latent=(ltxv_img_to_video_inplace_33, 0),
        audio_latent=(ltxv_empty_latent_audio_27, 0),
    )
    sampler_custom_advanced_35 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2990, 3420),
        noise=(random_noise_5, 0),
        guider=(cfg_guider_30, 0),
        sampler=(ksampler_select_8, 0),
        sigmas=(manual_sigmas_9, 0),
        latent_image=(concat_av_latent_34, 0),
    )
    separate_av_latent_36 = g.add(
        "LTXVSeparateAVLatent", {}, (3330, 3430), av_latent=(sampler_custom_advanced_35, 0)
    )
    ltxv_crop_guides_37 = g.add(
        "LTXVCropGuides",
        {},
        (3330, 3610),
        positive=(ltxv_conditioning_29, 0),
        negative=(ltxv_conditioning_29, 1),
        latent=(separate_av_latent_36, 0),
    )
    cfg_guider_38 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (4230, 3570),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_crop_guides_37, 0),
        negative=(ltxv_crop_guides_37, 1),
    )
    ltxv_latent_upsampler_39 = g.add(
        "LTXVLatentUpsampler",
        {},
        (3750, 3430),
        samples=(separate_av_latent_36, 0),
        upscale_model=(latent_upscale_model_loader_21, 0),
        vae=(checkpoint_loader_simple_22, 2),
    )
    ltxv_img_to_video_inplace_40 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (3770, 3930),
        vae=(checkpoint_loader_simple_22, 2),
        image=(ltxv_preprocess_32, 0),
        latent=(ltxv_latent_upsampler_39, 0),
    )
    concat_av_latent_41 = g.add(
        "LTXVConcatAVLatent",
        {},
        (4240, 4050),
        video_latent=(ltxv_img_to_video_inplace_40, 0),
        audio_latent=(separate_av_latent_36, 1),
    )
    sampler_custom_advanced_42 = g.add(
        "SamplerCustomAdvanced",
        {},
        (4570, 3440),
        noise=(random_noise_4, 0),
        guider=(cfg_guider_38, 0),
        sampler=(ksampler_select_6, 0),
        sigmas=(manual_sigmas_7, 0),
        latent_image=(concat_av_latent_41, 0),
    )
    separate_av_latent_43 = g.add(
        "LTXVSeparateAVLatent", {}, (4600, 3780), av_latent=(sampler_custom_advanced_42, 0)
    )
    ltxv_audio_vae_decode_44 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (3830, 4580),
        samples=(separate_av_latent_43, 1),
        audio_vae=(ltxv_audio_vae_loader_12, 0),
    )
    distributed_vae_decode_45 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 4,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (3840, 4310),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(separate_av_latent_43, 0),
    )
    create_video_46 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (4560, 4400),
        fps=(comfy_math_expression_16, 0),
        images=(distributed_vae_decode_45, 0),
        audio=(ltxv_audio_vae_decode_44, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.3_id_lora", "format": "auto", "codec": "auto"},
        (430, 3530),
        video=(create_video_46, 0),
    )
    return g


TWINS_23 = (
    template_23_t2v,
    template_23_i2v,
    template_23_ia2v,
    template_23_flf2v,
    template_23_ic_lora,
    template_23_id_lora,
)
