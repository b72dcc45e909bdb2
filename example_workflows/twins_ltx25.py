"""The MGPU twins of ComfyUI's official LTX-2.5 templates (example_workflows/make_workflows.py writes them).

Each is the official template's graph (comfyui-workflow-templates-json 0.1.123, its subgraph flattened;
the same nodes, values, seeds, schedules and guiders) with the heavy nodes ours: the MGPU Loader (the
transformer and the two VAE files) with its MODEL into the template's own guiders and samplers, MGPU
Text Encode (Gemma 4 with its projection) for CLIPTextEncode, Distributed VAE Decode (tiled, the
template's tile settings: VAEDecodeTiled's frames, the tiles dealt over the GPUs) for VAEDecodeTiled.
The template's own loaders stay where other nodes need them
(its video VAE for the image guides and the latent upscaler, the prompt enhancer's Gemma).
tests/test_official_templates.py checks each twin node for node against the downloaded template and runs
it on the tiny files.
The graphs, prompts and settings come from those templates (Comfy Org, MIT licence).
"""

from __future__ import annotations

from twins_ltx23 import DESCRIPTIONS
from workflow_graph import Graph


def template_25_t2v() -> Graph:
    g = Graph("ltx2_5_mgpu_t2v", DESCRIPTIONS["video_ltx2_5_t2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "ltx-2.5-video-vae-bf16.safetensors",
            "audio_vae_name": "ltx-2.5-audio-vae-bf16.safetensors",
        },
        (640, 6190),
    )
    manual_sigmas_2 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (3700, 6930))
    ksampler_select_3 = g.add("KSamplerSelect", {"sampler_name": "euler_ancestral"}, (3710, 6560))
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 42}, (3710, 6150))
    manual_sigmas_5 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (2190, 6910),
    )
    ksampler_select_6 = g.add("KSamplerSelect", {"sampler_name": "euler_ancestral"}, (2190, 6730))
    random_noise_7 = g.add("RandomNoise", {"noise_seed": 558811532553686}, (2190, 6300))
    mgpu_text_encode_8 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1170, 6880),
        mgpu_model=(mgpu_loader_1, 0),
    )
    latent_upscale_model_loader_9 = g.add(
        "LatentUpscaleModelLoader",
        {"model_name": "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"},
        (630, 6980),
    )
    vae_loader_10 = g.add("VAELoader", {"vae_name": "ltx-2.5-video-vae-bf16.safetensors"}, (640, 6420))
    vae_loader_11 = g.add("VAELoader", {"vae_name": "ltx-2.5-audio-vae-bf16.safetensors"}, (640, 6590))
    primitive_int_12 = g.add("PrimitiveInt", {"value": 24}, (150, 7070), "Frame Rate")
    comfy_math_expression_13 = g.add(
        "ComfyMathExpression",
        {"expression": "a"},
        (660, 7670),
        "Math Expression (fps)",
        **{"values.a": (primitive_int_12, 0)},
    )
    primitive_int_14 = g.add("PrimitiveInt", {"value": 5}, (150, 6510), "Duration")
    comfy_math_expression_15 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (670, 7770),
        "Math Expression (length)",
        **{"values.a": (primitive_int_14, 0), "values.b": (primitive_int_12, 0)},
    )
    ltxv_empty_latent_audio_16 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (1190, 7660),
        frames_number=(comfy_math_expression_15, 1),
        frame_rate=(comfy_math_expression_13, 1),
        audio_vae=(vae_loader_11, 0),
    )
    primitive_string_multiline_17 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": 'A close-up of an Arctic hunter\'s face, his eyes fixed straight ahead, narrowed and locked on something in the far distance directly in front of him, frost dusting his dark beard, one hand slowly reaching toward the rifle slung on his back, his breath quick and shallow, the tension in his jaw visible even through the scarf. The camera slowly pulls back, revealing him crouched at the edge of an ice floe, and ahead of him, in the exact direction of his gaze, a polar bear moves slowly along a distant ice ridge, its pale coat blending into the white haze, facing toward him. The pull-back continues, the hunter in the foreground and the bear far ahead, the two facing each other across the dark lead of water, the ice field and grey sea stretching around them, seabirds wheeling overhead. Midway through the shot, the complete title "LTX-2.5" fades in large and centered, plain white sans-serif letters with wide spacing, no glow, no shadow, no ornament, the lettering large enough to dominate the center of the frame, emerging slowly from the mist, resting still and blending into the snowscape, with the hunter and the bear still visible below on either side of the title, staying through the end of the scene. The wind carries the distant sound of shifting ice, a single low growl rolling across the water.'
        },
        (150, 6080),
        "Prompt",
    )
    clip_loader_18 = g.add(
        "CLIPLoader",
        {"clip_name": "gemma4_e2b_it_int8_convrot.safetensors", "type": "ltxv", "device": "default"},
        (120, 5290),
    )
    text_generate_ltx2_prompt_19 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 600,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.15,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (570, 5280),
        prompt=(primitive_string_multiline_17, 0),
        clip=(clip_loader_18, 0),
    )
    primitive_boolean_20 = g.add(
        "PrimitiveBoolean", {"value": False}, (140, 5760), "Boolean (Enable Prompt Enhance)"
    )
    comfy_switch_node_21 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1100, 5690),
        switch=(primitive_boolean_20, 0),
        on_false=(primitive_string_multiline_17, 0),
        on_true=(text_generate_ltx2_prompt_19, 0),
    )
    mgpu_text_encode_22 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1160, 6040),
        mgpu_model=(mgpu_loader_1, 0),
        text=(comfy_switch_node_21, 0),
    )
    ltxv_conditioning_23 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (1780, 6070),
        frame_rate=(comfy_math_expression_13, 0),
        positive=(mgpu_text_encode_22, 0),
        negative=(mgpu_text_encode_8, 0),
    )
    dual_cfg_guider_24 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (3710, 6310),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_conditioning_23, 0),
        negative=(ltxv_conditioning_23, 1),
    )
    dual_cfg_guider_25 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (2190, 6490),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_conditioning_23, 0),
        negative=(ltxv_conditioning_23, 1),
    )
    g.add("PreviewAny", {}, (1410, 5300), source=(comfy_switch_node_21, 0))
    resolution_selector_27 = g.add(
        "ResolutionSelector",
        {"aspect_ratio": "16:9 (Widescreen)", "megapixels": 0.9, "multiple": 32},
        (2140, 6810),
    )
    primitive_int_28 = g.add(
        "PrimitiveInt", {"value": 720}, (150, 6880), "Height", value=(resolution_selector_27, 1)
    )
    comfy_math_expression_29 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (660, 7530), **{"values.a": (primitive_int_28, 0)}
    )
    primitive_int_30 = g.add(
        "PrimitiveInt", {"value": 1280}, (150, 6690), "Width", value=(resolution_selector_27, 0)
    )
    comfy_math_expression_31 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (660, 7470), **{"values.a": (primitive_int_30, 0)}
    )
    empty_ltxv_latent_video_32 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (1200, 7360),
        width=(comfy_math_expression_31, 1),
        height=(comfy_math_expression_29, 1),
        length=(comfy_math_expression_15, 1),
    )
    concat_av_latent_33 = g.add(
        "LTXVConcatAVLatent",
        {},
        (1630, 7490),
        video_latent=(empty_ltxv_latent_video_32, 0),
        audio_latent=(ltxv_empty_latent_audio_16, 0),
    )
    sampler_custom_advanced_34 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2870, 6300),
        noise=(random_noise_7, 0),
        guider=(dual_cfg_guider_25, 0),
        sampler=(ksampler_select_6, 0),
        sigmas=(manual_sigmas_5, 0),
        latent_image=(concat_av_latent_33, 0),
    )
    separate_av_latent_35 = g.add(
        "LTXVSeparateAVLatent", {}, (2870, 6670), av_latent=(sampler_custom_advanced_34, 0)
    )
    ltxv_latent_upsampler_36 = g.add(
        "LTXVLatentUpsampler",
        {},
        (3250, 6470),
        samples=(separate_av_latent_35, 0),
        upscale_model=(latent_upscale_model_loader_9, 0),
        vae=(vae_loader_10, 0),
    )
    concat_av_latent_37 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3710, 6760),
        video_latent=(ltxv_latent_upsampler_36, 0),
        audio_latent=(separate_av_latent_35, 1),
    )
    sampler_custom_advanced_38 = g.add(
        "SamplerCustomAdvanced",
        {},
        (4090, 6150),
        noise=(random_noise_4, 0),
        guider=(dual_cfg_guider_24, 0),
        sampler=(ksampler_select_3, 0),
        sigmas=(manual_sigmas_2, 0),
        latent_image=(concat_av_latent_37, 0),
    )
    separate_av_latent_39 = g.add(
        "LTXVSeparateAVLatent", {}, (4400, 6150), av_latent=(sampler_custom_advanced_38, 0)
    )
    ltxv_audio_vae_decode_40 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (4750, 6350),
        samples=(separate_av_latent_39, 1),
        audio_vae=(vae_loader_11, 0),
    )
    distributed_vae_decode_41 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 512,
            "overlap": 64,
            "temporal_size": 64,
            "temporal_overlap": 16,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (4750, 6050),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(separate_av_latent_39, 0),
    )
    create_video_42 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (4730, 7010),
        fps=(comfy_math_expression_13, 0),
        images=(distributed_vae_decode_41, 0),
        audio=(ltxv_audio_vae_decode_40, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.5_t2v", "format": "auto", "codec": "auto"},
        (3000, 6550),
        video=(create_video_42, 0),
    )
    return g


def template_25_i2v() -> Graph:
    g = Graph("ltx2_5_mgpu_i2v", DESCRIPTIONS["video_ltx2_5_i2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "ltx-2.5-video-vae-bf16.safetensors",
            "audio_vae_name": "ltx-2.5-audio-vae-bf16.safetensors",
        },
        (650, 6200),
    )
    load_image_2 = g.add("LoadImage", {"image": "neon_cyborg_portrait.png"}, (1420, 6400), "Load First Frame")
    clip_loader_3 = g.add(
        "CLIPLoader",
        {"clip_name": "gemma4_e2b_it_int8_convrot.safetensors", "type": "ltxv", "device": "default"},
        (120, 5290),
    )
    primitive_boolean_4 = g.add(
        "PrimitiveBoolean", {"value": False}, (140, 5760), "Boolean (Enable Prompt Enhance)"
    )
    primitive_string_multiline_5 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "Use the provided start image as the first frame. The cybernetic figure slowly turns his head to the right, his glowing blue eyes scanning the horizon, mechanical joints in his neck whirring faintly. The camera follows his gaze, panning across the rooftop to reveal the city beyond: a river of light winding between dark towers, a flying vehicle gliding past between the buildings, its lights streaking. He watches it pass, then his eyes narrow slightly. The camera settles on his profile against the city glow, distant hover traffic humming, wind gusting across the rooftop. No text, no black frames."
        },
        (150, 6080),
        "Prompt",
    )
    primitive_int_6 = g.add("PrimitiveInt", {"value": 5}, (150, 6630), "Duration")
    primitive_boolean_7 = g.add("PrimitiveBoolean", {"value": False}, (160, 6480), "Switch to Text to Video?")
    vae_loader_8 = g.add("VAELoader", {"vae_name": "ltx-2.5-video-vae-bf16.safetensors"}, (650, 6410))
    vae_loader_9 = g.add("VAELoader", {"vae_name": "ltx-2.5-audio-vae-bf16.safetensors"}, (650, 6560))
    mgpu_text_encode_10 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1170, 6880),
        mgpu_model=(mgpu_loader_1, 0),
    )
    ksampler_select_11 = g.add("KSamplerSelect", {"sampler_name": "euler_ancestral"}, (2190, 6750))
    random_noise_12 = g.add("RandomNoise", {"noise_seed": 875362541677469}, (2190, 6300))
    manual_sigmas_13 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (2170, 6920),
    )
    primitive_int_14 = g.add("PrimitiveInt", {"value": 24}, (150, 7080), "Frame Rate")
    latent_upscale_model_loader_15 = g.add(
        "LatentUpscaleModelLoader",
        {"model_name": "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"},
        (650, 6930),
    )
    resize_image_mask_node_16 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 1536, "scale_method": "lanczos"},
        (190, 7480),
        input=(load_image_2, 0),
    )
    ltxv_preprocess_17 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (620, 7480), image=(resize_image_mask_node_16, 0)
    )
    text_generate_ltx2_prompt_18 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 600,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.15,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (570, 5280),
        prompt=(primitive_string_multiline_5, 0),
        clip=(clip_loader_3, 0),
        image=(ltxv_preprocess_17, 0),
    )
    comfy_switch_node_19 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1100, 5690),
        switch=(primitive_boolean_4, 0),
        on_false=(primitive_string_multiline_5, 0),
        on_true=(text_generate_ltx2_prompt_18, 0),
    )
    mgpu_text_encode_20 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1160, 6040),
        mgpu_model=(mgpu_loader_1, 0),
        text=(comfy_switch_node_19, 0),
    )
    g.add("PreviewAny", {}, (1410, 5300), source=(comfy_switch_node_19, 0))
    comfy_math_expression_22 = g.add(
        "ComfyMathExpression",
        {"expression": "a"},
        (1170, 7670),
        "Math Expression (fps)",
        **{"values.a": (primitive_int_14, 0)},
    )
    ltxv_conditioning_23 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (1810, 6480),
        frame_rate=(comfy_math_expression_22, 0),
        positive=(mgpu_text_encode_20, 0),
        negative=(mgpu_text_encode_10, 0),
    )
    dual_cfg_guider_24 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (2200, 6460),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_conditioning_23, 0),
        negative=(ltxv_conditioning_23, 1),
    )
    comfy_math_expression_25 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (1180, 7770),
        "Math Expression (length)",
        **{"values.a": (primitive_int_6, 0), "values.b": (primitive_int_14, 0)},
    )
    ltxv_empty_latent_audio_26 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (1620, 7370),
        frames_number=(comfy_math_expression_25, 1),
        frame_rate=(comfy_math_expression_22, 1),
        audio_vae=(vae_loader_9, 0),
    )
    random_noise_27 = g.add("RandomNoise", {"noise_seed": 42}, (3710, 6150))
    manual_sigmas_28 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (3710, 6980))
    dual_cfg_guider_29 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (3710, 6310),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_conditioning_23, 0),
        negative=(ltxv_conditioning_23, 1),
    )
    ksampler_select_30 = g.add("KSamplerSelect", {"sampler_name": "euler_ancestral"}, (3710, 6560))
    resolution_selector_31 = g.add(
        "ResolutionSelector",
        {"aspect_ratio": "16:9 (Widescreen)", "megapixels": 0.9, "multiple": 32},
        (1550, 7210),
    )
    primitive_int_32 = g.add(
        "PrimitiveInt", {"value": 1280}, (150, 6780), "Width", value=(resolution_selector_31, 0)
    )
    primitive_int_33 = g.add(
        "PrimitiveInt", {"value": 720}, (150, 6930), "Height", value=(resolution_selector_31, 1)
    )
    comfy_math_expression_34 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (1170, 7470), **{"values.a": (primitive_int_32, 0)}
    )
    comfy_math_expression_35 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (1170, 7530), **{"values.a": (primitive_int_33, 0)}
    )
    empty_ltxv_latent_video_36 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (1630, 7600),
        width=(comfy_math_expression_34, 1),
        height=(comfy_math_expression_35, 1),
        length=(comfy_math_expression_25, 1),
    )
    ltxv_img_to_video_inplace_37 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (2070, 7390),
        bypass=(primitive_boolean_7, 0),
        vae=(vae_loader_8, 0),
        image=(ltxv_preprocess_17, 0),
        latent=(empty_ltxv_latent_video_36, 0),
    )
    concat_av_latent_38 = g.add(
        "LTXVConcatAVLatent",
        {},
        (2470, 7390),
        video_latent=(ltxv_img_to_video_inplace_37, 0),
        audio_latent=(ltxv_empty_latent_audio_26, 0),
    )
    sampler_custom_advanced_39 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2610, 6510),
        noise=(random_noise_12, 0),
        guider=(dual_cfg_guider_24, 0),
        sampler=(ksampler_select_11, 0),
        sigmas=(manual_sigmas_13, 0),
        latent_image=(concat_av_latent_38, 0),
    )
    separate_av_latent_40 = g.add(
        "LTXVSeparateAVLatent", {}, (2890, 6520), av_latent=(sampler_custom_advanced_39, 0)
    )
    ltxv_latent_upsampler_41 = g.add(
        "LTXVLatentUpsampler",
        {},
        (3260, 6410),
        samples=(separate_av_latent_40, 0),
        upscale_model=(latent_upscale_model_loader_15, 0),
        vae=(vae_loader_8, 0),
    )
    ltxv_img_to_video_inplace_42 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (3270, 6620),
        bypass=(primitive_boolean_7, 0),
        vae=(vae_loader_8, 0),
        image=(ltxv_preprocess_17, 0),
        latent=(ltxv_latent_upsampler_41, 0),
    )
    concat_av_latent_43 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3710, 6760),
        video_latent=(ltxv_img_to_video_inplace_42, 0),
        audio_latent=(separate_av_latent_40, 1),
    )
    sampler_custom_advanced_44 = g.add(
        "SamplerCustomAdvanced",
        {},
        (4070, 6500),
        noise=(random_noise_27, 0),
        guider=(dual_cfg_guider_29, 0),
        sampler=(ksampler_select_30, 0),
        sigmas=(manual_sigmas_28, 0),
        latent_image=(concat_av_latent_43, 0),
    )
    separate_av_latent_45 = g.add(
        "LTXVSeparateAVLatent", {}, (4370, 6500), av_latent=(sampler_custom_advanced_44, 0)
    )
    distributed_vae_decode_46 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 512,
            "overlap": 64,
            "temporal_size": 64,
            "temporal_overlap": 16,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (4760, 6360),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(separate_av_latent_45, 0),
    )
    ltxv_audio_vae_decode_47 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (4760, 6650),
        samples=(separate_av_latent_45, 1),
        audio_vae=(vae_loader_9, 0),
    )
    create_video_48 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (5200, 6460),
        fps=(comfy_math_expression_22, 0),
        images=(distributed_vae_decode_46, 0),
        audio=(ltxv_audio_vae_decode_47, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX-2.5_i2v", "format": "auto", "codec": "auto"},
        (2540, 6400),
        video=(create_video_48, 0),
    )
    return g


def template_25_flf2v() -> Graph:
    g = Graph("ltx2_5_mgpu_flf2v", DESCRIPTIONS["video_ltx2_5_flf2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "ltx-2.5-video-vae-bf16.safetensors",
            "audio_vae_name": "ltx-2.5-audio-vae-bf16.safetensors",
        },
        (690, 1970),
    )
    load_image_2 = g.add("LoadImage", {"image": "robot_hand_energy.png"}, (1300, 2950), "Load Last Frame")
    manual_sigmas_3 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (1900, 2460),
    )
    sampler_euler_ancestral_4 = g.add("SamplerEulerAncestral", {"eta": 0, "s_noise": 1}, (1910, 2240))
    random_noise_5 = g.add("RandomNoise", {"noise_seed": 873293130933086}, (1910, 1840))
    mgpu_text_encode_6 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "text": "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, wrong hand count, artifacts around text, unreadable text on shirt or hat, incorrect lettering on cap (“PNTR”), incorrect t-shirt slogan (“JUST DO IT”), missing microphone, misplaced microphone, inconsistent perspective, camera shake, incorrect depth of field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, smiling, laughing, exaggerated sadness, wrong gaze direction, eyes looking at camera, mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, off-sync audio, missing sniff sounds, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, missing door or shelves, missing shallow depth of field, flat lighting, inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts.",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1220, 2450),
        mgpu_model=(mgpu_loader_1, 0),
    )
    vae_loader_7 = g.add("VAELoader", {"vae_name": "ltx-2.5-video-vae-bf16.safetensors"}, (690, 2130))
    vae_loader_8 = g.add("VAELoader", {"vae_name": "ltx-2.5-audio-vae-bf16.safetensors"}, (690, 2280))
    clip_loader_9 = g.add(
        "CLIPLoader",
        {"clip_name": "gemma4_e2b_it_int8_convrot.safetensors", "type": "ltxv", "device": "default"},
        (670, 1110),
    )
    primitive_boolean_10 = g.add(
        "PrimitiveBoolean", {"value": False}, (690, 1580), "Boolean (Enable Prompt Enhance)"
    )
    primitive_int_11 = g.add("PrimitiveInt", {"value": 1280}, (1180, 2860), "Width")
    primitive_int_12 = g.add("PrimitiveInt", {"value": 720}, (1180, 3010), "height")
    resize_image_mask_node_13 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 640,
            "resize_type.height": 360,
            "resize_type.crop": "center",
            "scale_method": "nearest-exact",
        },
        (1560, 3300),
        **{
            "resize_type.width": (primitive_int_11, 0),
            "resize_type.height": (primitive_int_12, 0),
            "input": (load_image_2, 0),
        },
    )
    ltxv_preprocess_14 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (1910, 3300), image=(resize_image_mask_node_13, 0)
    )
    primitive_int_15 = g.add("PrimitiveInt", {"value": 5}, (1180, 3160), "Duration")
    primitive_int_16 = g.add("PrimitiveInt", {"value": 24}, (1180, 3320), "Frame Rate(int)")
    comfy_math_expression_17 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (1180, 3490), **{"values.a": (primitive_int_16, 0)}
    )
    comfy_math_expression_18 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (1180, 3550),
        **{"values.a": (primitive_int_15, 0), "values.b": (primitive_int_16, 0)},
    )
    ltxv_empty_latent_audio_19 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (2380, 3350),
        frames_number=(comfy_math_expression_18, 1),
        frame_rate=(primitive_int_16, 0),
        audio_vae=(vae_loader_8, 0),
    )
    primitive_string_multiline_20 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "Use the provided start image as the first frame and the provided end image as the final frame anchor. The video opens on the back of the robotic hand, four fingers slightly curled, joints glowing faintly in the darkness, a low electrical hum filling the space. The hand rotates slowly at the wrist, turning from the back view toward the palm side, the four visible fingers uncurling gently one by one, starting with the index finger, then the middle, ring, and pinky, each joint clicking softly. As the palm turns upward, the thumb swings out from the side of the hand into view, clearly separate from the four fingers, all five fingers spreading open. A blue energy crystal fades into existence above the palm, its hum rising into a resonant tone, thin energy threads coiling around it, particles crackling softly as they spiral away like sparks. The crystal rotates slowly, hovering above the fully open hand, light spilling between the five spread fingers, the crystal's steady hum filling the silence as the video ends on the open palm with the glowing crystal.\n"
        },
        (690, 2870),
        "Prompt",
    )
    load_image_21 = g.add("LoadImage", {"image": "robot_hand.png"}, (1300, 2310), "Load First Frame")
    resize_image_mask_node_22 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 640,
            "resize_type.height": 360,
            "resize_type.crop": "center",
            "scale_method": "nearest-exact",
        },
        (1560, 2860),
        **{
            "resize_type.width": (primitive_int_11, 0),
            "resize_type.height": (primitive_int_12, 0),
            "input": (load_image_21, 0),
        },
    )
    get_image_size_23 = g.add("GetImageSize", {}, (1910, 3020), image=(resize_image_mask_node_22, 0))
    empty_ltxv_latent_video_24 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2380, 3110),
        width=(get_image_size_23, 0),
        height=(get_image_size_23, 1),
        length=(comfy_math_expression_18, 1),
    )
    ltxv_preprocess_25 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (1910, 2860), image=(resize_image_mask_node_22, 0)
    )
    text_generate_ltx2_prompt_26 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 600,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.15,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (1120, 1100),
        prompt=(primitive_string_multiline_20, 0),
        clip=(clip_loader_9, 0),
        image=(ltxv_preprocess_25, 0),
    )
    comfy_switch_node_27 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1650, 1510),
        switch=(primitive_boolean_10, 0),
        on_false=(primitive_string_multiline_20, 0),
        on_true=(text_generate_ltx2_prompt_26, 0),
    )
    mgpu_text_encode_28 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1200, 1880),
        mgpu_model=(mgpu_loader_1, 0),
        text=(comfy_switch_node_27, 0),
    )
    ltxv_conditioning_29 = g.add(
        "LTXVConditioning",
        {"frame_rate": 25},
        (2380, 2930),
        frame_rate=(comfy_math_expression_17, 0),
        positive=(mgpu_text_encode_28, 0),
        negative=(mgpu_text_encode_6, 0),
    )
    ltxv_add_guide_30 = g.add(
        "LTXVAddGuide",
        {"frame_idx": 0, "strength": 0.7},
        (2760, 2930),
        positive=(ltxv_conditioning_29, 0),
        negative=(ltxv_conditioning_29, 1),
        vae=(vae_loader_7, 0),
        latent=(empty_ltxv_latent_video_24, 0),
        image=(ltxv_preprocess_25, 0),
    )
    ltxv_add_guide_31 = g.add(
        "LTXVAddGuide",
        {"frame_idx": -1, "strength": 0.7},
        (2760, 3250),
        positive=(ltxv_add_guide_30, 0),
        negative=(ltxv_add_guide_30, 1),
        vae=(vae_loader_7, 0),
        latent=(ltxv_add_guide_30, 2),
        image=(ltxv_preprocess_14, 0),
    )
    concat_av_latent_32 = g.add(
        "LTXVConcatAVLatent",
        {},
        (2260, 2610),
        video_latent=(ltxv_add_guide_31, 2),
        audio_latent=(ltxv_empty_latent_audio_19, 0),
    )
    dual_cfg_guider_33 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (1910, 2000),
        model=(mgpu_loader_1, 1),
        positive=(ltxv_add_guide_31, 0),
        negative=(ltxv_add_guide_31, 1),
    )
    sampler_custom_advanced_34 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2380, 1850),
        noise=(random_noise_5, 0),
        guider=(dual_cfg_guider_33, 0),
        sampler=(sampler_euler_ancestral_4, 0),
        sigmas=(manual_sigmas_3, 0),
        latent_image=(concat_av_latent_32, 0),
    )
    separate_av_latent_35 = g.add(
        "LTXVSeparateAVLatent", {}, (2380, 2100), av_latent=(sampler_custom_advanced_34, 1)
    )
    ltxv_audio_vae_decode_36 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (2740, 2440),
        samples=(separate_av_latent_35, 1),
        audio_vae=(vae_loader_8, 0),
    )
    ltxv_crop_guides_37 = g.add(
        "LTXVCropGuides",
        {},
        (2750, 1950),
        positive=(ltxv_add_guide_31, 0),
        negative=(ltxv_add_guide_31, 1),
        latent=(separate_av_latent_35, 0),
    )
    distributed_vae_decode_38 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 512,
            "overlap": 64,
            "temporal_size": 64,
            "temporal_overlap": 16,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (2740, 2150),
        mgpu_model=(mgpu_loader_1, 0),
        latent=(ltxv_crop_guides_37, 2),
    )
    create_video_39 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (3200, 1840),
        fps=(comfy_math_expression_17, 0),
        images=(distributed_vae_decode_38, 0),
        audio=(ltxv_audio_vae_decode_36, 0),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/ltx2.5_flf2v", "format": "auto", "codec": "auto"},
        (2510, 2300),
        video=(create_video_39, 0),
    )
    g.add("PreviewAny", {}, (1960, 1120), source=(comfy_switch_node_27, 0))
    return g


TWINS_25 = (template_25_t2v, template_25_i2v, template_25_flf2v)
