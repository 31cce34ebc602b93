"""The Brown corpus as the bundled model's scripts read it (train_tiny_llama.py, train_medusa_heads.py)."""
import glob
import os
import re


def brown_documents(root):
    """The corpus is POS-tagged (`word/tag`); keep the words and undo the tokenized spacing of punctuation."""
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "c[a-r][0-9][0-9]"))):
        paragraphs = []
        for block in open(path, encoding="latin-1").read().split("\n\n"):
            words = [w.rsplit("/", 1)[0] for w in block.split() if "/" in w]
            if not words:
                continue
            text = " ".join(words)
            text = text.replace("``", '"').replace("''", '"')
            text = re.sub(r" ([.,;:!?)'])", r"\1", text)
            text = re.sub(r"([($]) ", r"\1", text)
            text = re.sub(r'" (.*?) "', r'"\1"', text)
            text = text.replace(" n't", "n't")
            paragraphs.append(text)
        docs.append("\n".join(paragraphs))
    return docs
