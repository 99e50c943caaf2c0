#!/usr/bin/env python3
# SPDX-License-Identifier: CC0-1.0
"""Procedural children's stories for the Splash demo model (our own code and word lists).

Every story is built from a cast (children and animals with consistent pronouns), a place,
an object and one of several plots (a lost thing found, a new friend, sharing, a fear
overcome, helping, a trip, a surprise, a rainy day, learning a skill, a quarrel and sorry),
told with varied openings, dialogue and endings. A few short chat exchanges teach the
ChatML turn ("Tell me a story about ..."). Same seed, same text.

    python3 storygen.py --seed 1 --count 5          # print five stories
"""
import argparse
import random

GIRLS = ["Lily", "Mia", "Anna", "Lucy", "Emma", "Zoe", "Sara", "Amy", "Ella", "Rosa", "Nina",
         "Ruby", "Kate", "Maya", "Ivy", "Jane", "Grace", "Daisy", "Molly", "Hannah"]
BOYS = ["Tom", "Ben", "Sam", "Max", "Jack", "Leo", "Tim", "Finn", "Noah", "Jake", "Paul",
        "Ollie", "Dan", "Luke", "Adam", "Oscar", "Henry", "Peter", "Ryan", "Eli"]
ANIMALS = ["cat", "dog", "mouse", "bear", "owl", "bird", "frog", "rabbit", "fox", "duck",
           "lion", "pig", "cow", "horse", "turtle", "squirrel", "puppy", "kitten", "bunny",
           "sheep", "goat", "monkey", "elephant", "dragon", "fish", "bee", "hen", "deer"]
ANIMAL_ADJ = ["little", "small", "big", "brave", "kind", "shy", "happy", "old", "young",
              "fluffy", "tiny", "friendly", "curious", "silly", "gentle", "clever", "sleepy"]
TRAITS = ["kind", "brave", "curious", "shy", "funny", "clever", "gentle", "cheerful", "busy",
          "helpful", "playful", "quiet", "happy"]
PLACES = [("park", "in"), ("forest", "in"), ("garden", "in"), ("beach", "on"), ("farm", "on"),
          ("hill", "on"), ("river", "by"), ("school", "at"), ("kitchen", "in"),
          ("library", "in"), ("zoo", "at"), ("village", "in"), ("meadow", "in"),
          ("lake", "by"), ("house", "in"), ("town", "in"), ("pond", "by"), ("field", "in"),
          ("castle", "in"), ("playground", "at")]
PLACE_ADJ = ["big", "small", "green", "quiet", "sunny", "old", "pretty", "busy", "little"]
COLORS = ["red", "blue", "green", "yellow", "pink", "purple", "orange", "white", "black",
          "brown", "golden", "shiny"]
OBJECTS = ["ball", "kite", "boat", "box", "car", "hat", "book", "doll", "drum", "cup",
           "spoon", "key", "stone", "shell", "flower", "balloon", "blanket", "bucket", "bell",
           "ring", "bike", "train", "robot", "crayon", "scarf", "leaf", "apple", "cake",
           "map", "toy", "sock", "feather", "star", "basket", "teddy bear", "umbrella"]
FOODS = ["apples", "cookies", "bread", "soup", "cake", "berries", "carrots", "pie",
         "sandwiches", "milk", "honey", "cheese", "pancakes", "grapes"]
GROWNUPS = [("Mom", "she"), ("Dad", "he"), ("Grandma", "she"), ("Grandpa", "he"),
            ("the teacher", "she"), ("the old farmer", "he")]
WEATHER = ["sunny", "warm", "cold", "windy", "rainy", "bright", "cloudy", "snowy"]
SKILLS = [("ride a bike", "rode the bike", "riding"), ("swim", "swam across the pond", "swimming"),
          ("fly a kite", "flew the kite high in the sky", "flying the kite"),
          ("read a book", "read the whole book", "reading"),
          ("climb a tree", "climbed to the top of the tree", "climbing"),
          ("bake a cake", "baked a big cake", "baking"),
          ("draw a picture", "drew a beautiful picture", "drawing"),
          ("sing a song", "sang a happy song", "singing"),
          ("tie a shoe", "tied the shoe all alone", "tying shoes"),
          ("catch a ball", "caught the ball", "catching")]
HAPPY = ["happy", "glad", "excited", "proud", "joyful"]
SAD = ["sad", "upset", "worried", "unhappy"]
SCARED = ["scared", "afraid", "nervous", "frightened"]
SAY = ["said", "asked", "cried", "shouted", "whispered", "replied", "laughed"]
THEMES = ["friendship", "sharing", "kindness", "being brave", "helping others", "trying again",
          "saying sorry", "being patient", "telling the truth"]


class Who:
    """One character: how the story names it and its pronouns."""

    def __init__(self, rng, kind=None, avoid=()):
        kind = kind or rng.choice(["girl", "boy", "animal", "animal"])
        self.kind = kind
        if kind == "animal":
            animal = rng.choice(ANIMALS)
            self.animal = animal
            self.adj = rng.choice(ANIMAL_ADJ)
            named = rng.random() < 0.4
            self.name = rng.choice([n for n in GIRLS + BOYS if n not in avoid]) if named else None
            gender = rng.choice(["she", "he"])
            if named:
                gender = "she" if self.name in GIRLS else "he"
            self.first = (f"a {self.adj} {animal} named {self.name}" if named
                          else f"{an(self.adj)} {self.adj} {animal}")
            self.ref = self.name if named else f"the {animal}"
        else:
            pool = GIRLS if kind == "girl" else BOYS
            self.name = rng.choice([n for n in pool if n not in avoid])
            gender = "she" if kind == "girl" else "he"
            self.first = f"a {rng.choice(['little', 'young', 'small', 'kind'])} {kind} named {self.name}"
            self.ref = self.name
        self.he = gender
        self.him = "her" if gender == "she" else "him"
        self.his = "her" if gender == "she" else "his"
        self.trait = rng.choice(TRAITS)

    @property
    def Ref(self):
        return self.ref[0].upper() + self.ref[1:]

    @property
    def He(self):
        return self.he.capitalize()

    @property
    def His(self):
        return self.his.capitalize()


def an(word):
    return "an" if word[0] in "aeiou" else "a"


def cap(s):
    return s[0].upper() + s[1:]


class Story:
    def __init__(self, rng):
        self.rng = rng
        self.lines = []

    def say(self, *options):
        self.lines.append(self.rng.choice(options))

    def pick(self, seq):
        return self.rng.choice(seq)

    def text(self):
        out = []
        para = []
        for line in self.lines:
            if line == "\n":
                if para:
                    out.append(" ".join(para))
                para = []
            else:
                para.append(line)
        if para:
            out.append(" ".join(para))
        return "\n\n".join(out)


def setting(rng):
    place, prep = rng.choice(PLACES)
    return place, prep, rng.choice(PLACE_ADJ)


def thing(rng):
    obj = rng.choice(OBJECTS)
    color = rng.choice(COLORS)
    return obj, color


def opening(s, a, place, prep, padj):
    r = s.rng
    s.say(f"Once upon a time, there was {a.first}.",
          f"Once upon a time, there was {a.first} who lived {prep} {an(padj)} {padj} {place}.",
          f"Once upon a time, {a.first} lived {prep} {an(padj)} {padj} {place}.",
          f"One day, {a.first} went to the {place}.",
          f"There once was {a.first}.",
          f"Long ago, {prep} {an(padj)} {padj} {place}, there lived {a.first}.",
          f"Once upon a time, in {an(padj)} {padj} {place}, there was {a.first}.")
    s.say(f"{a.He} was very {a.trait}.", f"{a.Ref} was {a.trait} and loved to play.",
          f"{a.Ref} liked to play {prep} the {place} every day.",
          f"{a.He} had many friends.", f"Every morning, {a.he} looked at the sky and smiled.")
    if r.random() < 0.5:
        s.say(f"It was a {r.choice(WEATHER)} day.", f"The sun was shining.",
              f"The birds were singing.", f"The sky was blue and the wind was soft.")


def ending(s, a, b=None, theme=None):
    r = s.rng
    both = f"{a.ref} and {b.ref}" if b else a.ref
    opts = [f"From that day on, {both} were always happy.",
            f"And they lived happily ever after.",
            f"{cap(both)} smiled. It was the best day ever.",
            f"That night, {a.ref} went to bed with a big smile.",
            f"{cap(both)} went home, tired and happy."]
    if b:
        opts.append(f"From that day on, {a.ref} and {b.ref} were best friends.")
    s.say(*opts)
    if theme and r.random() < 0.6:
        s.say(f"{a.Ref} learned that {theme} is very important.",
              f"{a.Ref} learned a lesson about {theme}.",
              f"The moral of the story is that {theme} makes everyone happy.")
    if r.random() < 0.25:
        s.say("The end.")


def quote(s, who, words, verb=None):
    verb = verb or s.pick(SAY)
    if words.endswith("?") and verb in ("said", "replied", "shouted"):
        verb = "asked"
    if s.rng.random() < 0.5:
        if words.endswith("."):
            words = words[:-1] + ","
        return f"\"{words}\" {verb} {who.ref}."
    return f"{who.Ref} {verb}, \"{words}\""


def plot_lost(s, a, place, prep, padj):
    obj, color = thing(s.rng)
    s.say(f"{a.Ref} had {an(color)} {color} {obj}.", f"{a.Ref} had a favorite {obj}. It was {color}.")
    s.say(f"{a.He} loved the {obj} very much.", f"{a.He} took the {obj} everywhere.")
    s.lines.append("\n")
    s.say(f"One day, {a.ref} could not find the {obj}.", f"One day, the {obj} was gone!",
          f"But one morning, {a.ref} lost the {obj} {prep} the {place}.")
    s.say(f"{a.Ref} felt {s.pick(SAD)}.", f"{a.He} was very {s.pick(SAD)}.")
    s.say(quote(s, a, f"Where is my {obj}?"), quote(s, a, f"I miss my {obj}!", "cried"))
    b = Who(s.rng, avoid=[a.name])
    s.say(f"Then {b.first} came by.", f"Just then, {b.first} saw {a.ref}.")
    s.say(quote(s, b, "Why are you sad?", "asked"), quote(s, b, "What is wrong?", "asked"))
    s.say(quote(s, a, f"I lost my {color} {obj}.", "said"))
    s.say(quote(s, b, "I will help you look for it.", "said"), quote(s, b, "Let's look together!"))
    s.lines.append("\n")
    spot = s.pick(["under a big tree", "behind a rock", "near the water", "under the bed",
                   "in a bush", "next to the door", "in the tall grass", "under a chair"])
    s.say(f"They looked everywhere. At last, {b.ref} found the {obj} {spot}.",
          f"They looked high and low. Then {a.ref} saw something {color} {spot}. It was the {obj}!")
    s.say(f"{a.Ref} was so {s.pick(HAPPY)}.", f"{a.Ref} jumped with joy.")
    s.say(quote(s, a, "Thank you for helping me!", "said"), quote(s, a, "Thank you, friend!"))
    ending(s, a, b, s.pick(["friendship", "helping others", "kindness"]))


def plot_friend(s, a, place, prep, padj):
    b = Who(s.rng, avoid=[a.name])
    s.say(f"{a.Ref} wanted a friend to play with.", f"{a.Ref} felt lonely. {a.He} had no one to play with.")
    s.say(f"One day, {a.he} saw {b.first} {prep} the {place}.",
          f"One day, {b.first} came to the {place}.")
    s.say(f"{b.Ref} looked {s.pick(['shy', 'sad', 'lonely', 'new', 'lost'])}.")
    s.say(quote(s, a, "Hello! Do you want to play with me?", "asked"),
          quote(s, a, "Hi! Can we be friends?", "asked"))
    s.say(quote(s, b, "Yes, I would like that!", "said"), quote(s, b, "Yes, please!"))
    s.lines.append("\n")
    game = s.pick(["played tag", "played hide and seek", "built a big sandcastle",
                   "ran and jumped", "sang songs", "drew pictures", "played with a ball",
                   "looked at the clouds", "picked flowers"])
    s.say(f"They {game} all day.", f"{a.Ref} and {b.ref} {game} together.")
    s.say("They laughed and had so much fun.", f"{b.Ref} was not {s.pick(['shy', 'sad'])} anymore.")
    if s.rng.random() < 0.5:
        s.say(quote(s, b, "You are a good friend.", "said"),
              quote(s, a, "I am happy you came here.", "said"))
    ending(s, a, b, "friendship")


def plot_share(s, a, place, prep, padj):
    b = Who(s.rng, avoid=[a.name])
    obj, color = thing(s.rng)
    s.say(f"{a.Ref} had {an(color)} {color} {obj}.", f"{a.Ref} got a new {obj} for {a.his} birthday.")
    s.say(f"{b.Ref} saw the {obj} and wanted to play with it too.",
          f"{cap(b.first)} came and looked at the {obj}.")
    s.say(quote(s, b, f"Can I play with your {obj}?", "asked"))
    s.say(f"At first, {a.ref} did not want to share.", f"{a.Ref} held the {obj} tight.")
    s.say(quote(s, a, f"No, it is my {obj}!", "said"))
    s.say(f"{b.Ref} was {s.pick(SAD)}.", f"{b.Ref} walked away {s.pick(SAD)}.")
    s.lines.append("\n")
    s.say(f"Then {a.ref} thought about it.", f"{a.Ref} felt bad.")
    s.say(quote(s, a, f"Wait! We can play with the {obj} together.", "said"),
          quote(s, a, f"I am sorry. Here, you can have a turn.", "said"))
    s.say(f"{b.Ref} smiled.", f"{b.Ref} was so {s.pick(HAPPY)}.")
    s.say(f"They took turns with the {obj} and had lots of fun.",
          f"Playing together was more fun than playing alone.")
    ending(s, a, b, "sharing")


def plot_fear(s, a, place, prep, padj):
    fear = s.pick(["the dark", "the big dog", "the loud thunder", "the deep water",
                   "the tall slide", "the old tree", "the big wave", "the noise at night"])
    s.say(f"{a.Ref} was {s.pick(SCARED)} of {fear}.", f"But {a.ref} had one problem. {a.He} was afraid of {fear}.")
    s.say(quote(s, a, f"I do not like {fear}.", "whispered"))
    g, gp = s.pick(GROWNUPS)
    s.say(f"{cap(g)} sat down next to {a.him}.", f"{cap(g)} gave {a.him} a big hug.")
    s.say(f"\"Do not be afraid,\" {g} said. \"I am here with you.\"",
          f"\"You are braver than you think,\" {g} said.")
    s.lines.append("\n")
    s.say(f"{a.Ref} took a deep breath.", f"{a.Ref} closed {a.his} eyes and counted to three.")
    s.say(f"{a.He} looked at {fear} again. It was not so bad!",
          f"Slowly, {a.he} was not {s.pick(SCARED)} anymore.")
    s.say(quote(s, a, "I did it!", "shouted"), quote(s, a, "I am brave!", "said"))
    s.say(f"{cap(g)} was very proud of {a.him}.")
    ending(s, a, None, "being brave")


def plot_help(s, a, place, prep, padj):
    b = Who(s.rng, avoid=[a.name])
    trouble = s.pick([("was stuck in a tree", "helped it climb down"),
                      ("had a hurt leg", "put a soft leaf on it"),
                      ("was lost and could not find home", "showed the way home"),
                      ("was hungry", "shared some food"),
                      ("dropped all the apples", "picked up the apples"),
                      ("was cold", "gave a warm blanket"),
                      ("could not reach the door", "held the door open")])
    s.say(f"One day, {a.ref} was walking {prep} the {place}.", f"One day, {a.ref} went for a walk.")
    s.say(f"{a.He} saw {b.first}.", f"Suddenly, {a.he} heard a small voice. It was {b.first}.")
    s.say(f"{b.Ref} {trouble[0]}.")
    s.say(quote(s, b, "Please help me!", "cried"), quote(s, b, "Can you help me?", "asked"))
    s.say(quote(s, a, "Do not worry. I will help you.", "said"))
    s.lines.append("\n")
    s.say(f"{a.Ref} {trouble[1]}.", f"So {a.ref} {trouble[1]}.")
    s.say(f"{b.Ref} felt much better.", f"{b.Ref} was very {s.pick(HAPPY)}.")
    s.say(quote(s, b, "Thank you! You are so kind.", "said"))
    s.say(f"{a.Ref} felt warm inside. Helping was a good feeling.",
          f"{a.Ref} smiled. It felt good to help.")
    ending(s, a, b, "helping others")


def plot_trip(s, a, place, prep, padj):
    g, gp = s.pick(GROWNUPS)
    dest, dprep = s.pick(PLACES)
    while dest == place:
        dest, dprep = s.pick(PLACES)
    s.say(f"One morning, {g} said, \"Today we will go to the {dest}!\"",
          f"One day, {a.ref} and {g} went on a trip to the {dest}.")
    s.say(f"{a.Ref} was very {s.pick(HAPPY)}.", f"{a.Ref} jumped up and down.")
    s.say(f"{a.He} put {a.his} {s.pick(OBJECTS)} in a bag.", f"They packed some {s.pick(FOODS)}.")
    s.lines.append("\n")
    sights = s.pick([("a big red barn", "cows and sheep"), ("tall trees", "a family of deer"),
                     ("blue water", "little fish"), ("many books", "a story about the moon"),
                     ("a long river", "ducks swimming"), ("big animals", "a sleeping lion")])
    s.say(f"At the {dest}, they saw {sights[0]}.", f"The {dest} had {sights[0]}.")
    s.say(f"{a.Ref} saw {sights[1]}.", f"Then they saw {sights[1]}.")
    s.say(quote(s, a, "Look! This is so much fun!", "shouted"),
          quote(s, a, "Can we come back tomorrow?", "asked"))
    s.say(f"They ate {s.pick(FOODS)} and played until the sun went down.",
          f"They had a picnic with {s.pick(FOODS)}.")
    ending(s, a, None, None)


def plot_surprise(s, a, place, prep, padj):
    b = Who(s.rng, avoid=[a.name])
    s.say(f"Tomorrow was {b.ref}'s birthday.", f"It was almost {b.ref}'s birthday.")
    s.say(f"{a.Ref} wanted to make a surprise for {b.him}.")
    gift = s.pick(["a card", "a cake", "a picture", "a crown of flowers", "a little song",
                   "a paper boat", "a necklace of shells"])
    s.say(f"{a.He} made {gift} all by {a.him}self.",
          f"{a.He} worked hard to make {gift}.")
    s.lines.append("\n")
    s.say(f"The next day, {a.ref} gave {b.ref} the surprise.", f"When {b.ref} came, {a.ref} shouted, \"Surprise!\"")
    s.say(f"{b.Ref} was so surprised.", f"{b.Ref} opened {b.his} eyes wide.")
    s.say(quote(s, b, "Wow! Did you make this for me?", "asked"))
    s.say(quote(s, a, "Yes! Happy birthday!", "said"))
    s.say(f"{b.Ref} gave {a.ref} a big hug.", f"{b.Ref} smiled and said thank you.")
    ending(s, a, b, "kindness")


def plot_rain(s, a, place, prep, padj):
    s.say(f"One day, {a.ref} wanted to play outside.", f"{a.Ref} wanted to go to the {place}.")
    s.say("But it started to rain.", "But dark clouds came, and the rain fell down.")
    s.say(f"{a.Ref} was {s.pick(SAD)}.", f"{a.Ref} looked out of the window and frowned.")
    s.say(quote(s, a, "Now I cannot play!", "said"))
    g, gp = s.pick(GROWNUPS)
    s.lines.append("\n")
    s.say(f"{cap(g)} had an idea.", f"Then {g} smiled.")
    idea = s.pick(["build a fort with blankets", "bake some cookies", "paint pictures",
                   "read a story", "play a game", "make a puppet show"])
    s.say(f"\"Let's {idea},\" {g} said.")
    s.say(f"So they did. It was so much fun!", f"{a.Ref} laughed and clapped.")
    s.say(f"Soon the rain stopped, and a rainbow came out.",
          f"When the rain stopped, {a.ref} saw a big rainbow in the sky.")
    ending(s, a, None, s.pick(["being patient", None]))


def plot_skill(s, a, place, prep, padj):
    learn, did, ing = s.pick(SKILLS)
    s.say(f"{a.Ref} wanted to learn to {learn}.", f"{a.Ref} wished {a.he} could {learn}.")
    s.say(f"{a.He} tried, but it was hard.", f"The first time {a.he} tried, {a.he} fell down.")
    s.say(f"{a.He} felt {s.pick(SAD)}.", quote(s, a, "I cannot do it!", "cried"))
    b = Who(s.rng, avoid=[a.name])
    s.say(f"{b.Ref} said, \"Try again. You can do it!\"",
          f"{cap(b.first)} saw {a.him}. \"Do not give up,\" {b.he} said.")
    s.lines.append("\n")
    s.say(f"So {a.ref} tried again and again.", f"{a.Ref} practiced every day.")
    s.say(f"At last, {a.he} {did}!", f"One day, {a.ref} {did}!")
    s.say(f"{a.Ref} was so {s.pick(HAPPY)}.", quote(s, a, "I did it!", "shouted"))
    s.say(f"Now {a.ref} loves {ing}.")
    ending(s, a, b, "trying again")


def plot_sorry(s, a, place, prep, padj):
    b = Who(s.rng, avoid=[a.name])
    obj, color = thing(s.rng)
    s.say(f"{a.Ref} and {b.ref} were playing {prep} the {place}.")
    s.say(f"{b.Ref} had {an(color)} {color} {obj}.")
    s.say(f"{a.Ref} took the {obj} and it broke.", f"{a.Ref} pulled the {obj} too hard, and it broke.")
    s.say(f"{b.Ref} started to cry.", f"{b.Ref} was very {s.pick(SAD)}.")
    s.say(quote(s, b, f"You broke my {obj}!", "cried"))
    s.lines.append("\n")
    s.say(f"{a.Ref} felt bad.", f"{a.Ref} looked down at the ground.")
    s.say(quote(s, a, "I am sorry. I did not mean to.", "said"))
    s.say(f"{a.Ref} helped fix the {obj}.", f"Together they fixed the {obj} with glue.")
    s.say(f"{b.Ref} smiled again.", quote(s, b, "It is okay. Thank you for saying sorry.", "said"))
    ending(s, a, b, "saying sorry")


PLOTS = [plot_lost, plot_friend, plot_share, plot_fear, plot_help, plot_trip, plot_surprise,
         plot_rain, plot_skill, plot_sorry]
PLOT_TOPICS = {plot_lost: "a lost toy", plot_friend: "a new friend", plot_share: "sharing",
               plot_fear: "being brave", plot_help: "helping a friend", plot_trip: "a trip",
               plot_surprise: "a birthday surprise", plot_rain: "a rainy day",
               plot_skill: "learning something new", plot_sorry: "saying sorry"}


def story(rng, kind=None, plot=None):
    """One story; returns (text, hero, plot)."""
    s = Story(rng)
    a = Who(rng, kind)
    place, prep, padj = setting(rng)
    opening(s, a, place, prep, padj)
    plot = plot or rng.choice(PLOTS)
    plot(s, a, place, prep, padj)
    return s.text(), a, plot


REQUESTS = ["Tell me a story.", "Tell me a story!", "Can you tell me a story?",
            "Please tell me a story.", "Write a short story.", "Tell me a bedtime story.",
            "I want to hear a story.", "Once upon a time"]


def about(a):
    if a.kind == "animal":
        return f"a {a.animal}"
    return f"{an(a.kind)} {a.kind} named {a.name}"


def chat(rng):
    """One ChatML exchange: (user text, assistant text)."""
    r = rng.random()
    if r < 0.1:
        greet = rng.choice(["Hello!", "Hi!", "Hello", "Hi there!", "Hey!", "Good morning!"])
        reply = rng.choice(["Hello! I am a small demo model. I like to tell stories. "
                            "Ask me for a story!",
                            "Hi! Would you like to hear a story?",
                            "Hello! I can tell you a story about a cat, a dog, or a little girl."])
        return greet, reply
    if r < 0.15:
        q = rng.choice(["Who are you?", "What is your name?", "What can you do?",
                        "What are you?"])
        reply = rng.choice(["I am the Splash demo model. I am very small, and I know how to "
                            "tell simple stories.",
                            "I am a tiny story model. I can tell you a story. Just ask!"])
        return q, reply
    kind = rng.choice(["girl", "boy", "animal", "animal"])
    plot = rng.choice(PLOTS)
    text, a, plot = story(rng, kind, plot)
    form = rng.random()
    if form < 0.35:
        user = rng.choice(REQUESTS)
    elif form < 0.7:
        user = rng.choice(["Tell me a story about {}.", "Can you tell me a story about {}?",
                           "Write a story about {}.", "Please tell me a story about {}.",
                           "I want a story about {}."]).format(about(a))
    else:
        user = rng.choice(["Tell me a story about {}.", "Write a short story about {}.",
                           "Tell me a story about {}, please."]).format(PLOT_TOPICS[plot])
    return user, text


def corpus(seed, count, chat_share=0.2):
    """Yields ('story', text) and ('chat', (user, assistant)) items."""
    rng = random.Random(seed)
    for _ in range(count):
        if rng.random() < chat_share:
            yield "chat", chat(rng)
        else:
            yield "story", story(rng)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=5)
    args = ap.parse_args()
    for kind, item in corpus(args.seed, args.count):
        if kind == "chat":
            print(f"[user] {item[0]}\n[assistant] {item[1]}\n")
        else:
            print(item + "\n")


if __name__ == "__main__":
    main()
