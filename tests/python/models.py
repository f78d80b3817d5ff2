"""Small modules the frontend tests export (also usable from the command
line: python3 -m ferry.torch export tests/python/models.py:LinearRelu ...)."""
import torch
from torch import nn


class LinearRelu(nn.Module):

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))  # LINE:linear_relu


class ConvBnRelu(nn.Module):

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class InplaceRelu(nn.Module):

    def forward(self, x):
        y = x + 1
        y.relu_()  # LINE:relu_
        return y


class ViewTranspose(nn.Module):

    def forward(self, x):
        return x.view(4, 6).transpose(0, 1)


class TupleOutput(nn.Module):

    def forward(self, x, y):
        return x + y, x * y


class WithBuffer(nn.Module):

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x):
        return x * self.scale


class CountingBuffer(nn.Module):
    """Writes its buffer in place: a MUTABLE_BUFFER."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(4))

    def forward(self, x):
        self.count.add_(x)
        return self.count * 2


class Quantized(nn.Module):

    def forward(self, x):
        return torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)


class Sparse(nn.Module):

    def forward(self, x):
        return x.to_sparse()


class TokenEmbedding(nn.Module):
    """An int64 input (token ids)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, ids):
        return self.emb(ids)


class GPTBlock(nn.Module):

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads)**0.5)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    """A small GPT-style decoder: token + position embedding, causal
    self-attention (triu mask, masked_fill, softmax), gelu, layer norm."""

    def __init__(self, vocab=32, dim=16, heads=2, layers=2, context=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(GPTBlock(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        return torch.log_softmax(self.head(self.ln(x)), dim=-1)


class SmallViT(nn.Module):
    """torchvision's VisionTransformer in a small configuration."""

    def __init__(self):
        super().__init__()
        from torchvision.models.vision_transformer import VisionTransformer
        self.vit = VisionTransformer(image_size=32,
                                     patch_size=8,
                                     num_layers=2,
                                     num_heads=2,
                                     hidden_dim=16,
                                     mlp_dim=32,
                                     num_classes=10)
        # torchvision zero-initialises the classification head, which would
        # make every output exactly its (zero) bias: random weights instead,
        # so comparisons of outputs see the whole network.
        nn.init.normal_(self.vit.heads.head.weight, std=0.5)
        nn.init.normal_(self.vit.heads.head.bias, std=0.5)

    def forward(self, x):
        return self.vit(x)


class TiedWeights(nn.Module):
    """One Parameter under two names (embedding and output projection)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


class NoKernel(nn.Module):
    """An operator Ferry has no kernel for (lgamma): it exports and lowers
    with its schema; verify names the node and its source line."""

    def forward(self, x):
        return torch.lgamma(x) + 1  # LINE:lgamma
