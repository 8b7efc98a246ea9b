"""Models as their users write them, none of them an nn.Sequential: three
torchvision CNNs (in-place ReLUs, residual adds), a small ViT, a GPT-like
decoder (an nn.ModuleList of blocks called in a loop with attention_mask
and position_ids, tuple and dataclass outputs) and a U-Net with torch.cat
skips.  Widths are tiny: the tests run on a loaded 2-core machine."""
import dataclasses
import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


class PatchViT(nn.Module):
    def __init__(self, dim=32, depth=3, heads=4, patch=4, image=16, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.encoder = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.1, batch_first=True)
            for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embedding
        for layer in self.encoder:
            x = layer(x)
        return self.head(self.norm(x[:, 0]))


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, attention_mask):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + attention_mask
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class DecoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.drop = nn.Dropout(0.1)

    def forward(self, hidden, attention_mask=None, position_ids=None):
        hidden = hidden + self.drop(self.attn(self.ln1(hidden), attention_mask))
        hidden = hidden + self.drop(self.mlp(self.ln2(hidden)))
        return (hidden,)


@dataclasses.dataclass
class CausalLMOutput:
    logits: torch.Tensor = None
    hidden: torch.Tensor = None
    aux: int = 0


class Decoder(nn.Module):
    def __init__(self, vocab, dim, heads, layers, ctx):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.embed_positions = nn.Embedding(ctx, dim)
        self.layers = nn.ModuleList(DecoderLayer(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        hidden = self.embed_tokens(input_ids) + self.embed_positions(position_ids)
        i = position_ids[0]
        causal = (i[None, :] > i[:, None]).float() * -1e4
        mask = causal[None, None] + (1.0 - attention_mask[:, None, None, :].float()) * -1e4
        for layer in self.layers:
            out = layer(hidden, attention_mask=mask, position_ids=position_ids)
            hidden = out[0]
        return self.norm(hidden)


class GPT(nn.Module):
    """Hugging Face's shape: model.model.layers, keyword arguments, a
    dataclass output (or a tuple, return_dict=False)."""

    def __init__(self, vocab=64, dim=32, heads=4, layers=4, ctx=16):
        super().__init__()
        self.model = Decoder(vocab, dim, heads, layers, ctx)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, attention_mask=None, position_ids=None, return_dict=True):
        hidden = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        logits = self.lm_head(hidden)
        if return_dict:
            return CausalLMOutput(logits=logits, hidden=hidden)
        return (logits, hidden)


def gpt_inputs(batch=2, t=16, vocab=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, t), generator=g)
    mask = torch.ones(batch, t, dtype=torch.long)
    mask[0, -3:] = 0
    pos = torch.arange(t).expand(batch, t)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": pos}


class Outputs(OrderedDict):
    """An OrderedDict subclass for outputs, as ModelOutput is."""


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1),
                         nn.ReLU(inplace=True))


class UNet(nn.Module):
    """Three rings: encoder features kept for the decoder (torch.cat skips)."""

    def __init__(self, c=4, classes=3):
        super().__init__()
        self.enc1, self.enc2, self.enc3 = conv_block(3, c), conv_block(c, 2 * c), \
            conv_block(2 * c, 4 * c)
        self.mid = conv_block(4 * c, 8 * c)
        self.up3 = nn.ConvTranspose2d(8 * c, 4 * c, 2, stride=2)
        self.dec3 = conv_block(8 * c, 4 * c)
        self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.dec2 = conv_block(4 * c, 2 * c)
        self.up1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.dec1 = conv_block(2 * c, c)
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        m = self.mid(F.max_pool2d(e3, 2))
        d3 = self.dec3(torch.cat([self.up3(m), e3], dim=1))
        d2 = self.dec2(torch.cat([self.up2(d3), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return Outputs(mask=self.out(d1), features=m)


def _tv(name, **kw):
    import torchvision
    return getattr(torchvision.models, name)(**kw)


def vgg11():
    """torchvision's VGG-11 (in-place ReLUs in features and classifier) with
    its classifier's widths cut from 4096 to 32: 400 MB of weights would
    make every step of the tests slow, and change nothing they check."""
    m = _tv("vgg11", num_classes=10)
    m.classifier[0] = nn.Linear(512 * 7 * 7, 32)
    m.classifier[3] = nn.Linear(32, 32)
    m.classifier[6] = nn.Linear(32, 10)
    return m


# name: (make the model, make the sample, loss of the output)
MODELS = {
    "resnet18": (lambda: _tv("resnet18", num_classes=10), lambda: torch.randn(2, 3, 32, 32),
                 lambda y: y.square().mean()),
    "mobilenet_v2": (lambda: _tv("mobilenet_v2", num_classes=10, width_mult=0.25),
                     lambda: torch.randn(2, 3, 32, 32), lambda y: y.square().mean()),
    "vgg11": (vgg11, lambda: torch.randn(1, 3, 32, 32),
              lambda y: y.square().mean()),
    "vit": (lambda: PatchViT(), lambda: torch.randn(2, 3, 16, 16), lambda y: y.square().mean()),
    "gpt": (lambda: GPT(), gpt_inputs, lambda y: F.cross_entropy(
        y.logits.flatten(0, 1), torch.arange(y.logits.shape[0] * y.logits.shape[1]) % 64)),
    "unet": (lambda: UNet(), lambda: torch.randn(2, 3, 32, 32),
             lambda y: y["mask"].square().mean() + y["features"].mean()),
}
